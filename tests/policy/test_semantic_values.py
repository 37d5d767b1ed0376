"""Routes to a control that takes a value, read without the value (SubwordSettings.semantic_value_paths,
base "tiny-minilm-words-values"): the typed text leaves the instruction before it meets the control,
the routes are the ones SimDroid's expert takes, an encoded step carries what a plain loop over the
rule gives, and on the real encoder a typed search now points at Chrome."""

from __future__ import annotations

import random

import pytest
import torch

from distrl_core.policy import Policy
from distrl_core.policy import semantic_match as sm
from distrl_core.policy.config import SubwordSettings
from distrl_core.policy.vocabulary import VALUE_PATHS_PATH, app_labels, control_paths, value_paths
from tests.policy.subword_encoder import small_subword_config, write_small_encoder


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory):
    return write_small_encoder(tmp_path_factory.mktemp("values") / "small", seed=0)


@pytest.mark.parametrize(
    ("instruction", "without"),
    [
        ("google best ramen in tokyo", "google"),
        ("search for cheap hotels in lisbon please", "search for please"),
        ("google 'how to repot a cactus'", "google"),  # quoted: the quotes go with it
        ('Search "x y" now', "Search now"),
        ("go to shopmart.com", "go to"),
        ("set an alarm for 7:15 AM", "set an alarm for 7:15 AM"),  # a time stays: no route types it
        ("turn the wifi off", "turn the wifi off"),  # nothing to type
        ("'hello there'", "'hello there'"),  # nothing would be left: the instruction itself
    ],
)
def test_the_values_leave_the_instruction(instruction, without):
    assert sm.instruction_without_values(instruction) == without


def test_value_similarities_equal_a_plain_loop():
    rng = random.Random(0)
    for _ in range(50):
        paths = rng.randint(1, 8)
        full, without = torch.randn(paths), torch.randn(paths)
        values = [rng.random() < 0.4 for _ in range(paths)]
        expected = [float(w) if v else float(f) for f, w, v in zip(full, without, values, strict=True)]
        assert sm.value_similarities(full, without, values).tolist() == expected


def test_the_value_routes_are_the_expert_s():
    from simulators.corpus import value_paths as expert_value_routes

    assert value_paths() == tuple(expert_value_routes()), (
        f"{VALUE_PATHS_PATH} is out of date: run `python -m simulators.corpus --write`"
    )
    # The slider is named by its description (its text is its value); the address bar is the field
    # the expert taps and then types into; "Add alarm" opens a dialog, whose field takes the time.
    assert value_paths() == ("Settings > Display > Brightness", "Chrome > Search or type web address")
    assert all(route.split(" > ")[0] in app_labels() for route in value_paths())


def test_settings_join_the_value_routes_to_the_scope_once(encoder_dir):
    apps = ("Settings", "Chrome")
    settings = SubwordSettings(
        str(encoder_dir),
        semantic_match=True,
        semantic_labels=apps,
        semantic_paths=["Chrome > Search or type web address"],
        semantic_value_paths=["Settings > Display > Brightness", "Chrome > Search or type web address"],
    )  # a saved config's JSON holds lists
    settings.validate()
    assert settings.semantic_scope() == (
        ("Settings",),
        ("Chrome",),
        ("Chrome", "Search or type web address"),
        ("Settings", "Display", "Brightness"),
    )
    assert settings.semantic_values() == (False, False, True, True)
    assert SubwordSettings(str(encoder_dir), semantic_labels=apps).semantic_values() == ()
    with pytest.raises(ValueError, match="semantic_value_paths entry 'Display > Brightness'"):
        SubwordSettings(
            str(encoder_dir),
            semantic_match=True,
            semantic_labels=apps,
            semantic_value_paths=("Display > Brightness",),
        ).validate()
    with pytest.raises(ValueError, match="set semantic_labels too"):
        SubwordSettings(
            str(encoder_dir), semantic_match=True, semantic_value_paths=("Settings > Display",)
        ).validate()


def _launcher():
    from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
    from simulators.simdroid.device import SimDroidConfig
    from simulators.simdroid.free_task import make_task

    env = SimDroidEnv(SimDroidEnvConfig(device=SimDroidConfig(distractor_prob=0.0), screenshots=False))
    task = make_task("google best ramen in tokyo", "web_search", {"query": "best ramen in tokyo"})
    return env.reset(task, seed=0).ui_text


def _options(values: bool) -> dict:
    options = {"semantic_match": True, "semantic_labels": app_labels(), "semantic_paths": control_paths()}
    return options | ({"semantic_value_paths": value_paths()} if values else {})


def test_an_encoded_step_reads_the_value_routes_without_the_value(encoder_dir):
    policy = Policy.create(small_subword_config(encoder_dir, **_options(values=True)))
    subwords = policy.config.subwords
    scope, values = subwords.semantic_scope(), subwords.semantic_values()
    cache = sm.embedding_cache()
    ui_text = _launcher()
    for instruction in ("google best ramen in tokyo", "open the settings", "look up 'flat tyre fix'"):
        full = cache.compute(str(encoder_dir), [instruction])[0]
        without = cache.compute(str(encoder_dir), [sm.instruction_without_values(instruction)])[0]
        similarities = []
        for path, value in zip(scope, values, strict=True):  # a loop over the rule as stated
            leaf = cache.compute(str(encoder_dir), [path[-1]])
            similarities.append(float(sm.cosine_similarities(without if value else full, leaf)[0]))
        step = policy.encode(instruction, ui_text)
        labels = [label for _, _, label in step.elements]
        expected = sm.scoped_indices(labels, scope, torch.tensor(similarities)).tolist()
        assert step.semantic is not None
        assert [step.semantic[first] for first, _, _ in step.elements] == expected, instruction
    plain = Policy.create(small_subword_config(encoder_dir, **_options(values=False)))
    assert policy.base.hash != plain.base.hash  # the same weights read other inputs


def _marked(policy: Policy, instruction: str, ui_text: str) -> list[str]:
    step = policy.encode(instruction, ui_text)
    assert step.semantic is not None
    return [label for first, _, label in step.elements if step.semantic[first] > sm.BINS]


def test_a_typed_search_points_at_chrome_on_the_real_encoder(minilm_dir):
    reading = {
        values: Policy.create(small_subword_config(minilm_dir, **_options(values)))
        for values in (False, True)
    }
    ui_text = _launcher()
    # The query's topic pulls the whole instruction to another app; "google" alone is like the bar.
    assert _marked(reading[False], "google best ramen in tokyo", ui_text) != ["Chrome"]
    assert _marked(reading[True], "google best ramen in tokyo", ui_text) == ["Chrome"]
    # An app named among other words is still that app: its route takes no value.
    for values in (False, True):
        assert _marked(reading[values], "take me to google maps", ui_text) == ["Maps"]
    # The brightness slider's route leads to Settings, which the Display page alone did not.
    assert _marked(reading[True], "dim the screen to 20%", ui_text) == ["Settings"]
