"""Prefect's test harness (one temporary API for the session), an embedded home per test and a demo's folder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    from prefect.settings import PREFECT_CLIENT_MAX_RETRIES, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    # The harness's SQLite API answers 503 ("database is locked") when the machine is loaded and
    # several flow runs write at once; the client retries 503 with exponential backoff, so give it
    # more tries than the default 5 before a test fails on an infrastructure hiccup.
    from tests.prefect_services import forget_prefect_workers

    forget_prefect_workers()  # none may still point at another server this process talked to
    with (
        temporary_settings({PREFECT_CLIENT_MAX_RETRIES: 9}),
        prefect_test_harness(server_startup_timeout=180),
    ):
        yield


@pytest.fixture
def embedded_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefect_api: None) -> Path:
    """Store, MLflow database and policy cache of one test, in its own folder."""
    monkeypatch.setenv("DISTRL_STORE_URI", str(tmp_path / "store"))
    monkeypatch.setenv("DISTRL_MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("DISTRL_MLFLOW_CACHE_DIR", str(tmp_path / "policy-cache"))
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    return tmp_path


@pytest.fixture
def demo_root(tmp_path: Path, prefect_api: None) -> Iterator[Path]:
    """The demo's own folder as its store, MLflow database and policy cache; the environment that
    `run_demo` sets for itself is put back afterwards."""
    root = tmp_path / "demo"
    saved = dict(os.environ)
    os.environ.update(
        DISTRL_STORE_URI=str(root / "store"),
        DISTRL_MLFLOW_TRACKING_URI=f"sqlite:///{root / 'mlflow.db'}",
        DISTRL_MLFLOW_CACHE_DIR=str(root / "policy-cache"),
        MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR="false",
    )
    try:
        yield root
    finally:
        os.environ.clear()
        os.environ.update(saved)


def small_validation_demo(selection: str, **overrides: object) -> object:
    """The smallest demo that still runs every role in validation mode: two collectors, five
    warm-start updates, four learner updates, one held-out episode per task, all in this process
    (where a test's spies see what it loads)."""
    from flows.train_local_params import TrainLocalParams, heldout_split
    from storage.replay_config import ReplaySettings
    from tasks.evaluator import EvaluatorParams
    from tasks.learner import LearnerParams

    return TrainLocalParams(
        validation=True,
        validation_split=selection,
        collectors=2,
        envs_per_collector=4,
        minutes=3.0,  # a ceiling: the run ends when the learner has done max_updates
        warm_start_updates=5,
        step_latency_s=0.02,
        learner=LearnerParams(updates_per_block=2, publish_every_updates=2, batch_size=4, max_updates=4),
        replay=ReplaySettings(min_size_steps=20, samples_per_insert=None),
        evaluator_process=False,
        # The run waits for the evaluator's last score: at niceness 19 (the default; the thread's
        # own test is tests/integration/test_processes.py) it waited on the suite's other workers.
        evaluator_nice=0,
        evaluator=EvaluatorParams(
            split=heldout_split(TrainLocalParams(validation=True, validation_split=selection)),
            episodes_per_task=1,
            poll_seconds=1.0,
        ),
        **overrides,
    )
