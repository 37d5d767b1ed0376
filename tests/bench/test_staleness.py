"""bench/staleness.py's two ways of making data stale, and the learning-curve methods it reuses."""

from __future__ import annotations

from bench.learning_curve import METHODS
from bench.staleness import job_settings
from distrl_core.learner import LearnerConfig


def test_each_condition_sets_the_loop_lag_and_the_learners_max_policy_lag():
    base = {"learner": {"actor_lr": 1e-3}, "env_steps": 600}
    replay = job_settings(base, "replay", 4, keep=3)
    slowed = job_settings(base, "slowed", 4, keep=3)
    assert (replay["behaviour_lag"], replay["learner"]["max_policy_lag"]) == (0, 4)
    assert (slowed["behaviour_lag"], slowed["learner"]["max_policy_lag"]) == (4, 7)
    assert slowed["learner"]["actor_lr"] == 1e-3 and "max_policy_lag" not in base["learner"]


def test_every_method_is_a_valid_learner_config():
    for algorithm, overrides in METHODS.values():
        LearnerConfig(algorithm=algorithm, **overrides)
    assert METHODS["adagrpo"][0] == "gigpo" and METHODS["decoupled_ppo"][0] == "decoupled_ppo"
