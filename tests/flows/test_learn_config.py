"""The `learn` deployment sets LearnerConfig fields as `retrain` does: `learner_config` overrides,
checked by name when the parameters are read, and used by the learner it opens."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from tasks.learner import LearnerParams

ROOT = Path(__file__).resolve().parents[2]


def test_learn_parameters_carry_learner_config_overrides():
    params = LearnerParams(
        algorithm="digirl", seed=4, learner_config={"actor_lr": 0.5, "awr_threshold": 0.02}
    )
    config = params.to_learner_config()
    assert (config.algorithm, config.seed, config.actor_lr, config.awr_threshold) == ("digirl", 4, 0.5, 0.02)
    assert LearnerParams().to_learner_config() == LearnerParams(learner_config={}).to_learner_config()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"actor_learning_rate": 1.0}, "unknown field.*actor_learning_rate"),
        ({"seed": 3}, "parameters of their own"),
        ({"actor_lr": -1.0}, "actor_lr"),
    ],
)
def test_bad_overrides_are_refused_when_the_parameters_are_read(overrides, message):
    with pytest.raises(ValidationError, match=message):
        LearnerParams(learner_config=overrides)


def test_a_field_the_algorithm_does_not_read_is_refused_by_name():
    with pytest.raises(
        ValidationError, match=r"entropy_coef=0\.02 is read only by aride and gigpo and decoupled_ppo"
    ):
        LearnerParams(algorithm="digirl", learner_config={"entropy_coef": 0.02})


def test_the_learn_deployment_offers_learner_config():
    deployments = yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]
    (learn,) = [d for d in deployments if d["entrypoint"] == "flows/learn.py:learn"]
    params = LearnerParams(**learn["parameters"]["params"])
    assert params.learner_config == {}


@pytest.mark.slow  # MLflow on SQLite: its schema migrations alone take ~10 s on 2 busy cores
def test_the_learner_opened_for_learn_uses_the_overrides(tmp_path, monkeypatch, make_policy):
    from distrl_core.policy import save_policy
    from storage.registry import PolicyRegistry
    from tasks.learner import close_learner, open_learner

    monkeypatch.setenv("DISTRL_STORE_URI", str(tmp_path / "store"))
    monkeypatch.setenv("DISTRL_MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("DISTRL_MLFLOW_CACHE_DIR", str(tmp_path / "policy-cache"))
    registry = PolicyRegistry()
    save_policy(make_policy(), tmp_path / "v")
    registry.publish(tmp_path / "v", run_id=registry.start_run("learner"))
    session = open_learner(LearnerParams(learner_config={"actor_lr": 0.25, "critic_warmup_updates": 0}))
    try:
        assert session.learner.config.actor_lr == 0.25 and session.learner.config.critic_warmup_updates == 0
        assert session.learner.actor_optimizer.param_groups[0]["lr"] == 0.25
    finally:
        close_learner(session)
