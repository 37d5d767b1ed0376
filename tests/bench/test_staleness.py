"""bench/staleness.py's two ways of making data stale, and the learning-curve methods it reuses."""

from __future__ import annotations

import json

import pytest

from bench._curve_settings import CurveSettings
from bench.learning_curve import METHODS
from bench.staleness import job_settings, main
from distrl_core.learner import LearnerConfig


def test_each_condition_sets_the_loop_lag_and_the_learners_max_policy_lag():
    base = CurveSettings(env_steps=600, learner={"actor_lr": 1e-3})
    replay = job_settings(base, "replay", 4, keep=3)
    slowed = job_settings(base, "slowed", 4, keep=3)
    assert (replay.behaviour_lag, replay.learner["max_policy_lag"]) == (0, 4)
    assert (slowed.behaviour_lag, slowed.learner["max_policy_lag"]) == (4, 7)
    assert slowed.learner["actor_lr"] == 1e-3 and "max_policy_lag" not in base.learner


def test_every_method_is_a_valid_learner_config():
    for algorithm, overrides in METHODS.values():
        LearnerConfig(algorithm=algorithm, **overrides)
    assert METHODS["adagrpo"][0] == "gigpo" and METHODS["decoupled_ppo"][0] == "decoupled_ppo"


def test_a_tiny_run_end_to_end_reports_each_condition_and_lag(tmp_path):
    """The bench drives learning_curve's jobs; a settings key they read and it lacks fails here."""
    out = tmp_path / "staleness.json"
    argv = [
        "--seeds", "0", "--lags", "2", "--conditions", "replay", "slowed",
        "--methods", "aride", "--env-steps", "120", "--episodes-per-round", "8",
        "--updates-per-round", "2", "--eval-tasks", "2", "--eval-episodes", "1",
        "--warm-start-updates", "2", "--out", str(out),
    ]  # fmt: skip
    main(argv)
    document = json.loads(out.read_text())
    assert sorted(document["summary"]) == ["general/replay/lag2", "general/slowed/lag2"]
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # the plot beside it
    by_condition = {r["condition"]: r for r in document["runs"]}
    assert by_condition["replay"]["learner_config"]["max_policy_lag"] == 2
    assert by_condition["slowed"]["learner_config"]["max_policy_lag"] == 2 + 4
    assert all(r["rounds"][-1]["env_steps"] >= 120 for r in document["runs"])

    # Rerun one method only: the other's runs come from the first result, and are marked so.
    again = tmp_path / "again.json"
    main(
        [
            *argv[:-1],
            str(again),
            "--methods",
            "aride",
            "decoupled_ppo",
            "--reuse",
            str(out),
            "--rerun",
            "decoupled_ppo",
        ]
    )
    second = json.loads(again.read_text())
    reused = [r for r in second["runs"] if r.get("reused")]
    assert {r["method"] for r in reused} == {"aride"} and len(reused) == 2
    assert {r["method"] for r in second["runs"] if not r.get("reused")} == {"decoupled_ppo"}
    assert "decoupled_ppo_minus_aride" in second["summary"]["general/replay/lag2"]
    with pytest.raises(SystemExit, match="env_steps"):  # refused before anything runs
        main([*argv[:-1], str(tmp_path / "no.json"), "--env-steps", "240", "--reuse", str(out)])
