"""One loss per Algorithm: its slice of LearnerConfig, its traits, and the error for a field set for
an algorithm that does not read it."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import get_args

import pytest

from distrl_core.learner.config import ALGORITHMS, Algorithm, LearnerConfig, learner_config
from distrl_core.learner.losses import LOSSES, field_readers, loss_type, make_loss
from distrl_core.learner.losses.base import Loss, slice_fields

ROOT = Path(__file__).resolve().parents[2]
LEARNER_FIELDS = {f.name for f in dataclasses.fields(LearnerConfig)}
# A value away from the default of each field some loss reads (of the default's type).
CHANGED = {
    f.name: (not f.default)
    if isinstance(f.default, bool)
    else ("average" if f.name == "proximal_policy" else f.default / 2)
    for f in dataclasses.fields(LearnerConfig)
    if f.name in field_readers()
}


def test_every_algorithm_has_a_loss():
    assert tuple(LOSSES) == ALGORITHMS == get_args(Algorithm)
    assert all(issubclass(loss, Loss) for loss in LOSSES.values())


def test_the_traits_of_each_algorithm():
    traits = {
        name: (t.uses_critic, t.needs_groups, t.needs_whole_episodes, t.needs_proximal)
        for name, t in ((name, loss.traits) for name, loss in LOSSES.items())
    }
    assert traits == {
        "decoupled_ppo": (True, False, False, True),
        "aride": (True, False, False, False),
        "digirl": (True, False, False, False),
        "filtered_bc": (True, False, False, False),
        "gigpo": (False, True, True, False),
    }


def test_each_slice_holds_the_fields_its_loss_reads():
    slices = {name: slice_fields(loss.slice_type) for name, loss in LOSSES.items()}
    assert all(fields <= LEARNER_FIELDS for fields in slices.values())
    shared = {"entropy_coef", "invalid_penalty", "repeat_penalty"}
    retrace = {"gamma", "lam", "rho_max", "c_max", "w1", "w2", "w3", "priority_eps"}
    shaping = {"normalize_advantages", "positive_advantages_only"}
    assert slices["aride"] == retrace | shaping | shared | {"trajectory_critic_coef"}
    assert slices["digirl"] == {
        "gamma", "digirl_lam", "curriculum_top_fraction", "awr_threshold", "trajectory_critic_coef",
    }  # fmt: skip
    assert slices["filtered_bc"] == {"gamma", "trajectory_critic_coef"}
    assert slices["gigpo"] == {"gamma", "group_use_std", "group_step_weight", "clip_eps"} | shared
    assert slices["decoupled_ppo"] == slices["aride"] | {
        "clip_eps", "proximal_policy", "proximal_weight_max", "decoupled_retrace",
    }  # fmt: skip
    # The learner's own fields (optimisation, replay, options) are in no slice.
    assert not {"actor_lr", "micro_batch_size", "critic_warmup_updates", "seed"} & set(field_readers())


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_loss_holds_the_configured_values_of_its_slice_and_is_frozen(algorithm: Algorithm):
    own = {name: CHANGED[name] for name, readers in field_readers().items() if algorithm in readers}
    loss = make_loss(LearnerConfig(algorithm=algorithm, **own))
    assert isinstance(loss, loss_type(algorithm))

    def leaves(config: object) -> dict[str, object]:
        found: dict[str, object] = {}
        for f in dataclasses.fields(config):  # type: ignore[arg-type]
            value = getattr(config, f.name)
            found |= leaves(value) if dataclasses.is_dataclass(value) else {f.name: value}
        return found

    assert leaves(loss.config) == own
    with pytest.raises(dataclasses.FrozenInstanceError):
        loss.config.gamma = 0.5  # type: ignore[misc]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_field_of_another_algorithm_names_the_algorithms_that_read_it(algorithm: Algorithm):
    foreign = {name: readers for name, readers in field_readers().items() if algorithm not in readers}
    assert foreign, f"every loss field is read by {algorithm}"
    for name, readers in foreign.items():
        with pytest.raises(ValueError, match=rf"{name}=.* is read only by {' and '.join(readers)}, not by"):
            LearnerConfig(algorithm=algorithm, **{name: CHANGED[name]})
        # At its default it is harmless (a full to_dict() of another run's config round-trips).
        LearnerConfig(algorithm=algorithm, **{name: LearnerConfig().to_dict()[name]})


def test_a_gigpo_field_while_running_aride_is_refused_by_the_flows_too():
    with pytest.raises(
        ValueError, match=r"group_use_std=False is read only by gigpo, not by algorithm 'aride'"
    ):
        learner_config("aride", 0, {"group_use_std": False})
    assert learner_config("gigpo", 0, {"group_use_std": False}).group_use_std is False


def test_a_name_without_a_loss_says_where_it_goes():
    with pytest.raises(ValueError, match=r"LOSSES in distrl_core/learner/losses/__init__\.py"):
        loss_type("ppo")  # type: ignore[arg-type]


def test_no_code_outside_the_loss_table_compares_an_algorithm_name():
    # `x.algorithm == "gigpo"` and the like: a trait of the algorithm's loss says it instead.
    names = set(ALGORITHMS)
    found = []
    for package in ("distrl_core", "simulators", "storage", "tasks", "flows", "ops"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Compare):
                    sides = [node.left, *node.comparators]
                    if any(isinstance(s, ast.Constant) and s.value in names for s in sides):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"compare the loss's traits, not the algorithm's name: {found}"
