"""The semantic match feature along the routes to the device's controls (SubwordSettings.semantic_paths,
base "tiny-minilm-controls"): an app is as similar as its most similar control, the best route marks
the deepest of its labels each screen shows, the routes are the ones SimDroid's expert takes, and a
version carries its routes in its hash."""

from __future__ import annotations

import random

import pytest
import torch

from distrl_core.policy import Policy, load_policy, save_policy
from distrl_core.policy import semantic_match as sm
from distrl_core.policy.config import SubwordSettings, policy_config_for
from distrl_core.policy.vocabulary import CONTROL_PATHS_PATH, app_labels, control_paths, value_paths
from tests.policy.subword_encoder import small_subword_config, write_small_encoder

SCOPE = (
    ("Settings",),
    ("Clock",),
    ("Gmail",),
    ("Chrome",),
    ("Settings", "Network & internet", "Wi-Fi"),
    ("Settings", "Network & internet", "Airplane mode"),
    ("Settings", "Display", "Dark theme"),
    ("Settings", "Display"),
    ("Clock", "Add alarm"),
)
SCREENS = {
    "launcher": ["Search", "Settings", "Clock", "gmail", "Chrome", "Weather"],
    "settings list": ["Settings", "Network & internet", "Display", "Battery"],
    "network page": ["Navigate up", "Network & internet", "Wi-Fi", "Airplane mode", "Mobile data"],
    "display page": ["Navigate up", "Display", "Dark theme", "Brightness level"],
    "clock": ["Clock", "Alarm", "Clock", "Add alarm"],
}
EDGES = torch.tensor(sm.BIN_EDGES).tolist()  # as float32, the similarities' type


def _reference(labels: list[str], scope, similarities: list[float], margin: float = 0.0) -> list[int]:
    """Plain loops over the rule as the docs state it."""
    apps_shown = {p[0].lower() for p in scope if len(p) == 1} & {label.lower() for label in labels}
    launcher = len(apps_shown) >= sm.LISTED_LABELS_MIN
    top = sorted(similarities, reverse=True)
    mark = margin <= 0 or top[0] - top[1] >= margin

    def scored(label: str) -> bool:
        depths = [d for p in scope for d, node in enumerate(p) if node.lower() == label.lower()]
        return bool(depths) and (min(depths) > 0 or launcher)

    out = []
    for label in labels:
        if not scored(label):
            out.append(sm.NEUTRAL)
            continue
        through = [
            s for p, s in zip(scope, similarities, strict=True) if label.lower() in (n.lower() for n in p)
        ]
        value = max(through)
        index = 1 + sum(1 for edge in EDGES if value >= edge)
        for p, s in zip(scope, similarities, strict=True):
            if mark and s == max(similarities):
                shown = [n for n in p if any(n.lower() == x.lower() for x in labels) and scored(n)]
                if shown and shown[-1].lower() == label.lower():
                    index += sm.BINS
                    break
        out.append(index)
    return out


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory):
    return write_small_encoder(tmp_path_factory.mktemp("paths") / "small", seed=0)


def test_path_indices_equal_a_plain_loop():
    rng = random.Random(0)
    for trial in range(200):
        # Rounded, so ties happen; as float32, what the encoder's cosines are.
        similarities = torch.tensor([round(rng.uniform(-0.1, 0.9), 2) for _ in SCOPE]).tolist()
        margin = (0.0, 0.05)[trial % 2]
        for labels in SCREENS.values():
            got = sm.scoped_indices(labels, SCOPE, torch.tensor(similarities), margin).tolist()
            assert got == _reference(labels, SCOPE, similarities, margin), (labels, similarities, margin)


def _indices(labels: list[str], similarities: list[float]) -> list[int]:
    return sm.scoped_indices(labels, SCOPE, torch.tensor(similarities)).tolist()


def test_a_switch_route_is_marked_on_every_screen_of_it():
    similarities = [0.2, 0.1, 0.1, 0.1, 0.75, 0.4, 0.3, 0.35, 0.05]  # the Wi-Fi route leads
    marked = {
        name: [label for label, i in zip(labels, _indices(labels, similarities), strict=True) if i > sm.BINS]
        for name, labels in SCREENS.items()
    }
    assert marked == {
        "launcher": ["Settings"],  # Settings is as like it as Wi-Fi, more than any other app
        "settings list": ["Network & internet"],
        "network page": ["Wi-Fi"],  # not the page's title, a label of the same route
        "display page": [],
        "clock": [],
    }
    launcher = sm.scoped_indices(SCREENS["launcher"], SCOPE, torch.tensor(similarities)).tolist()
    assert launcher[1] == 1 + 7 + sm.BINS  # Settings takes Wi-Fi's 0.75 bin
    # The settings list shows one app name: "Settings" there is a title, never scored.
    assert sm.scoped_indices(SCREENS["settings list"], SCOPE, torch.tensor(similarities))[0] == sm.NEUTRAL


def test_the_routes_are_the_expert_s(encoder_dir):
    from simulators.corpus import control_paths as expert_routes

    assert control_paths() == tuple(expert_routes()), (
        f"{CONTROL_PATHS_PATH} is out of date: run `python -m simulators.corpus --write`"
    )
    routes = control_paths()
    assert "Settings > Network & internet > Wi-Fi" in routes and "Clock > Add alarm" in routes
    assert all(route.split(" > ")[0] in app_labels() for route in routes)


def test_settings_refuse_a_route_that_does_not_start_at_an_app(encoder_dir):
    apps = ("Settings", "Clock")
    for bad in ("Network & internet > Wi-Fi", "Settings", "Settings >  > Wi-Fi"):
        with pytest.raises(ValueError, match="semantic_paths entry"):
            SubwordSettings(
                str(encoder_dir), semantic_match=True, semantic_labels=apps, semantic_paths=(bad,)
            ).validate()
    settings = SubwordSettings(
        str(encoder_dir), semantic_match=True, semantic_labels=apps, semantic_paths=["Clock > Add alarm"]
    )  # a saved config's JSON holds a list
    settings.validate()
    assert settings.semantic_scope() == (("Settings",), ("Clock",), ("Clock", "Add alarm"))


def test_an_encoded_settings_page_carries_the_route_and_a_version_hashes_apart(tmp_path, encoder_dir):
    from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
    from simulators.simdroid.device import SimDroidConfig
    from simulators.simdroid.expert import expert_action
    from simulators.simdroid.free_task import make_task

    options = {"semantic_match": True, "semantic_labels": app_labels(), "semantic_paths": control_paths()}
    policy = Policy.create(small_subword_config(encoder_dir, **options))
    env = SimDroidEnv(SimDroidEnvConfig(device=SimDroidConfig(distractor_prob=0.0), screenshots=False))
    task = make_task("turn the wifi off", "toggle_setting", {"setting": "wifi", "on": False})
    observation = env.reset(task, seed=0)
    cache, scope = sm.embedding_cache(), policy.config.subwords.semantic_scope()
    vector = cache.compute(str(encoder_dir), [task.instruction])[0]
    similarities = [
        float(sm.cosine_similarities(vector, cache.compute(str(encoder_dir), [p[-1]]))[0]) for p in scope
    ]
    for _ in range(3):  # the launcher, the settings list, the network page
        step = policy.encode(task.instruction, observation.ui_text)
        labels = [label for _, _, label in step.elements]
        expected = _reference(labels, scope, similarities)
        assert step.semantic is not None
        got = [step.semantic[first] for first, _, _ in step.elements]
        assert got == expected and any(i != sm.NEUTRAL for i in got), labels
        observation = env.step(expert_action(env, task)).observation
    save_policy(policy, tmp_path / "v1")
    loaded = load_policy(tmp_path / "v1", device="cpu")
    assert loaded.config.subwords.semantic_paths == control_paths()
    apps_only = Policy.create(
        small_subword_config(encoder_dir, semantic_match=True, semantic_labels=app_labels())
    )
    assert policy.base.hash != apps_only.base.hash


def test_tiny_minilm_controls_reads_simdroid_s_routes(encoder_dir, monkeypatch):
    from distrl_core.policy import pretrained
    from distrl_core.policy.defaults import describe_defaults

    prepared = pretrained.ConvertedModel(encoder_dir, encoder_dir, False, 0)
    monkeypatch.setitem(pretrained.PACKAGED_BASES, "minilm", lambda: prepared)
    config = policy_config_for("tiny-minilm-controls", 2, "fit_unseen")
    assert config.subwords is not None and config.subwords.semantic_paths == control_paths()
    assert config.subwords.semantic_labels == app_labels()
    assert f"routes to {len(control_paths())} controls" in describe_defaults(config)
    apps = policy_config_for("tiny-minilm-apps", 2).subwords
    assert apps is not None and apps.semantic_paths == ()
    values = policy_config_for("tiny-minilm-words-values", 2, "fit_unseen")
    assert values.subwords is not None and values.subwords.pool_words
    assert values.subwords.semantic_value_paths == value_paths()
    assert values.subwords.semantic_paths == control_paths() and config.subwords.semantic_value_paths == ()
    assert f"{len(value_paths())} of them, to a control taking a value" in describe_defaults(values)
