"""Batched MLflow metric logging (one request per block of work, never per step).

Metrics never stop a collector or the learner: a busy tracking store (SQLite is locked while
another thread writes) is retried with backoff, then skipped with a warning.
"""

from __future__ import annotations

import logging
import math
import time

from storage.registry import PolicyRegistry
from tasks import mlflow_ui
from tasks.retry import with_retries

log = logging.getLogger(__name__)


def log_metrics(registry: PolicyRegistry, run_id: str, metrics: dict[str, float], *, step: int) -> None:
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    batch = [
        Metric(key, float(value), now, int(step))
        for key, value in metrics.items()
        if isinstance(value, int | float) and math.isfinite(float(value))
    ]
    if not batch:
        return
    try:
        with_retries(lambda: registry.client.log_batch(run_id, metrics=batch), "logging metrics")
    except Exception as exc:
        log.warning("metrics for run %s were not logged (%s); training goes on", run_id, exc)


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
