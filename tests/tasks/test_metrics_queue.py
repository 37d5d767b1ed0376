"""Collectors queue their MLflow metrics; one thread per process sends them (`tasks.mlflow_metrics`),
on MLflow over SQLite: rows keep their steps and values, a flush sends a run's rows at once, and
rows beyond MLflow's 1,000 per `log_batch` are split."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from storage.registry import PolicyRegistry
from tasks.mlflow_metrics import MAX_METRICS_PER_CALL, MetricsQueue


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PolicyRegistry:
    monkeypatch.setenv("DISTRL_MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("DISTRL_MLFLOW_CACHE_DIR", str(tmp_path / "policy-cache"))
    return PolicyRegistry()


def _history(registry: PolicyRegistry, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in registry.client.get_metric_history(run_id, key))


def test_queued_rows_wait_for_the_flush_and_keep_their_steps(registry: PolicyRegistry) -> None:
    queue = MetricsQueue(every_s=3600)  # the thread never sends in this test: only the flush does
    run_a, run_b = registry.start_run("collector-a"), registry.start_run("collector-b")
    for step in (1, 2, 3):
        queue.put(registry, run_a, {"rolling_success": step / 4, "policy_version": 1.0}, step=step)
    queue.put(registry, run_b, {"rolling_success": 1.0, "not_a_number": float("nan")}, step=8)
    assert _history(registry, run_a, "rolling_success") == []  # queueing called no MLflow
    queue.flush(run_a)
    assert _history(registry, run_a, "rolling_success") == [(1, 0.25), (2, 0.5), (3, 0.75)]
    assert _history(registry, run_a, "policy_version") == [(1, 1.0), (2, 1.0), (3, 1.0)]
    assert _history(registry, run_b, "rolling_success") == []  # another run's rows stay queued
    queue.flush(run_b)
    assert _history(registry, run_b, "rolling_success") == [(8, 1.0)]
    assert _history(registry, run_b, "not_a_number") == []  # dropped, as `log_metrics` drops it
    queue.flush(run_b)  # nothing left: no second copy
    assert _history(registry, run_b, "rolling_success") == [(8, 1.0)]


def test_the_thread_sends_without_a_flush_in_batches_mlflow_accepts(registry: PolicyRegistry) -> None:
    queue = MetricsQueue(every_s=0.05)
    run_id = registry.start_run("collector-c")
    rows = MAX_METRICS_PER_CALL + 5  # one `log_batch` would be refused
    for step in range(rows):
        queue.put(registry, run_id, {"steps_per_second": float(step)}, step=step)
    deadline = time.monotonic() + 120  # a bound on the wait, not an assertion on time
    while len(_history(registry, run_id, "steps_per_second")) < rows and time.monotonic() < deadline:
        time.sleep(0.05)
    queue.flush(run_id)  # waits for a send under way
    assert _history(registry, run_id, "steps_per_second") == [(s, float(s)) for s in range(rows)]
