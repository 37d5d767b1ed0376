"""Batched MLflow metric logging (one request per block of work, never per step).

Metrics never stop a collector or the learner: a busy tracking store (SQLite is locked while
another thread writes) is retried with backoff, then skipped with a warning.

Collectors do not call MLflow at all while they act: at 64 collectors over 2 processes on the
embedded MLflow (SQLite in the process) 46 % of their wall-clock was inside `log_batch`, one row per
batch, each collector queueing on the store. A collector's row is queued (`queue_metrics`: a list
append) and one thread per process sends what is queued every `SEND_EVERY_S`, one `log_batch` per
run; the rows keep the step and the time they were queued with. `flush_queued_metrics` sends a run's
rows at once, in the caller's thread (a collector closing, before its run is finished).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import TYPE_CHECKING

from storage.registry import PolicyRegistry
from tasks import mlflow_ui
from tasks.retry import with_retries

if TYPE_CHECKING:
    from mlflow.entities import Metric

log = logging.getLogger(__name__)
SEND_EVERY_S = 5.0  # a collector's rows reach MLflow at most this late (its close flushes them)
MAX_METRICS_PER_CALL = 1000  # MLflow refuses a `log_batch` of more


def log_metrics(registry: PolicyRegistry, run_id: str, metrics: dict[str, float], *, step: int) -> None:
    _send(registry, run_id, _rows(metrics, step))


def _rows(metrics: dict[str, float], step: int) -> list[Metric]:
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    return [
        Metric(key, float(value), now, int(step))
        for key, value in metrics.items()
        if isinstance(value, int | float) and math.isfinite(float(value))
    ]


def _send(registry: PolicyRegistry, run_id: str, rows: list[Metric]) -> None:
    for start in range(0, len(rows), MAX_METRICS_PER_CALL):
        _send_one(registry, run_id, rows[start : start + MAX_METRICS_PER_CALL])


def _send_one(registry: PolicyRegistry, run_id: str, batch: list[Metric]) -> None:
    if not batch:
        return
    try:
        with_retries(lambda: registry.client.log_batch(run_id, metrics=batch), "logging metrics")
    except Exception as exc:
        log.warning("metrics for run %s were not logged (%s); training goes on", run_id, exc)


class MetricsQueue:
    """Metric rows queued per run, sent by one daemon thread every `every_s` (started at the first row)."""

    def __init__(self, every_s: float = SEND_EVERY_S) -> None:
        self.every_s = every_s
        self._lock = threading.Condition()
        self._queued: dict[str, tuple[PolicyRegistry, list[Metric]]] = {}
        self._sending: dict[str, int] = {}  # run id -> sends in flight (a flush waits for them)
        self._thread: threading.Thread | None = None

    def put(self, registry: PolicyRegistry, run_id: str, metrics: dict[str, float], *, step: int) -> None:
        rows = _rows(metrics, step)
        with self._lock:
            self._queued.setdefault(run_id, (registry, []))[1].extend(rows)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="mlflow-metrics", daemon=True)
                self._thread.start()

    def flush(self, run_id: str, timeout_s: float = 120.0) -> None:
        """Send `run_id`'s queued rows now, after any send of its rows already under way."""
        with self._lock:
            entry = self._queued.pop(run_id, None)
            self._lock.wait_for(lambda: not self._sending.get(run_id), timeout_s)
        if entry is not None:
            _send(entry[0], run_id, entry[1])

    def _loop(self) -> None:
        while True:
            time.sleep(self.every_s)
            with self._lock:
                taken, self._queued = self._queued, {}
                for run_id in taken:
                    self._sending[run_id] = self._sending.get(run_id, 0) + 1
            for run_id, (registry, rows) in taken.items():
                try:
                    _send(registry, run_id, rows)
                finally:
                    with self._lock:
                        self._sending[run_id] -= 1
                        if not self._sending[run_id]:
                            del self._sending[run_id]
                        self._lock.notify_all()


_queue = MetricsQueue()


def queue_metrics(registry: PolicyRegistry, run_id: str, metrics: dict[str, float], *, step: int) -> None:
    """Queue one row of `run_id`'s metrics for this process's sender thread; no MLflow call here."""
    _queue.put(registry, run_id, metrics, step=step)


def flush_queued_metrics(run_id: str) -> None:
    """Send `run_id`'s queued rows now (before its run is finished)."""
    _queue.flush(run_id)


def prefect_links() -> dict[str, str]:
    """Tags that lead from an MLflow run to the Prefect flow run that made it (none outside a run)."""
    from prefect.runtime import flow_run

    run_id = flow_run.get_id()
    if not run_id:
        return {}
    tags = {"prefect.flow_run_id": str(run_id), "prefect.flow_run_name": str(flow_run.get_name() or "")}
    url = flow_run.get_flow_run_ui_url()
    if url:
        tags["prefect.flow_run_url"] = url
    return tags


def run_url(registry: PolicyRegistry, run_id: str) -> str:
    """The run's page in the MLflow UI, in its model-training view (tasks/mlflow_ui.py)."""
    uri = registry.settings.tracking_uri
    return mlflow_ui.run_url(uri, registry.experiment_id(), run_id) + mlflow_ui.serve_hint(uri)


def start_tracked_run(
    registry: PolicyRegistry,
    name: str,
    *,
    tags: dict[str, str],
    params: dict[str, object],
    owned: bool = True,
) -> str:
    """An MLflow run with its parameters and links to the Prefect flow run; its URL goes to the run's log."""
    from mlflow.entities import Param

    def start() -> str:
        mlflow_ui.prepare_experiment(registry.client, registry.experiment_id())
        return registry.start_run(name, tags=tags | prefect_links(), owned=owned)

    run_id = with_retries(start, f"starting the MLflow run {name!r}")
    batch = [Param(k, str(v)[:500]) for k, v in sorted(params.items())]
    with_retries(lambda: registry.client.log_batch(run_id, params=batch), "logging params")
    run_logger().info("MLflow run %s: %s", name, run_url(registry, run_id))
    return run_id


def run_logger() -> logging.Logger | logging.LoggerAdapter:
    """The Prefect run's logger inside a flow or task run (shown in the UI), else this module's."""
    from prefect.exceptions import MissingContextError
    from prefect.logging import get_run_logger

    try:
        return get_run_logger()
    except MissingContextError:
        return log
