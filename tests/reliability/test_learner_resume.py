"""A restarted learner resumes its counters: learner_step and samples_seen
continue from the version it resumes, so β annealing and the critic warm-up do not start over."""

from __future__ import annotations

import pytest

from storage.store import Store
from tests.reliability.conftest import fill


@pytest.fixture
def registry_env(tmp_path, monkeypatch, local_store: Store) -> Store:
    monkeypatch.setenv("DISTRL_STORE_URI", local_store.uri)
    monkeypatch.setenv("DISTRL_MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("DISTRL_MLFLOW_CACHE_DIR", str(tmp_path / "policy-cache"))
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    return local_store


@pytest.mark.slow  # MLflow on SQLite: its schema migrations alone take ~10 s on 2 busy cores
def test_a_restarted_learner_continues_its_counters(registry_env: Store, make_policy, tmp_path) -> None:
    from distrl_core.policy import save_policy
    from storage.registry import PolicyRegistry
    from tasks.learner import LearnerParams, close_learner, open_learner, publish_policy

    fill(registry_env, 4)
    registry = PolicyRegistry()
    run = registry.start_run("learner")
    save_policy(make_policy(), tmp_path / "v")
    tags = {"learner_step": 28, "samples_seen": 912}
    version = registry.publish(tmp_path / "v", run_id=run, tags=tags)

    session = open_learner(LearnerParams(algorithm="aride"))
    assert (session.learner.updates, session.samples_seen) == (28, 912)
    beta_at_28 = session.learner.beta_at()
    assert beta_at_28 > session.learner.config.beta_start  # the schedule did not restart
    new = publish_policy.fn(session)
    assert new == version + 1 and registry.tags(new)["learner_step"] == "28"
    close_learner(session)

    # A fine-tune from a chosen version (the retrain flow) counts its own updates from 0.
    retrain = open_learner(LearnerParams(algorithm="aride"), start_version=version, role="retrain")
    assert retrain.learner.updates == 0
    close_learner(retrain)
