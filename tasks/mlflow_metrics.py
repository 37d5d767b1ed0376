"""Batched MLflow metric logging (one request per block of work, never per step).

Metrics never stop a collector or the learner: a busy tracking store (SQLite is locked while
another thread writes) is retried with backoff, then skipped with a warning.
"""

from __future__ import annotations

import errno
import logging
import math
import random
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from storage.registry import PolicyRegistry

log = logging.getLogger(__name__)
T = TypeVar("T")

# OSError numbers of a peer or a disk that may answer on the next try (s3fs maps S3's 503 SlowDown
# and ServiceUnavailable to EBUSY, its 500 InternalError to EREMOTEIO).
_TRANSIENT_ERRNOS = {
    errno.EAGAIN,
    errno.EBUSY,
    errno.ETIMEDOUT,
    errno.ECONNRESET,
    errno.ECONNREFUSED,
    errno.ECONNABORTED,
    errno.EPIPE,
    errno.ENETUNREACH,
    errno.EHOSTUNREACH,
    getattr(errno, "EREMOTEIO", errno.EIO),  # Linux only; s3fs falls back the same way
}
# MLflow's error codes for a server that cannot answer now (a locked SQLite store raises the first).
_TRANSIENT_MLFLOW_CODES = {"TEMPORARILY_UNAVAILABLE", "REQUEST_LIMIT_EXCEEDED", "DEADLINE_EXCEEDED"}


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and the exceptions it was raised from or while handling (MLflow wraps the request's)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)


def _http_status(exc: BaseException) -> int | None:
    """The HTTP status of the response behind `exc`, where it carries one."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):  # botocore's ClientError
        return response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    status = getattr(response, "status_code", None)  # requests' HTTPError
    if isinstance(status, int):
        return status
    if type(exc).__name__ == "RestException":  # an MLflow server's error answer, status from its code
        return int(exc.get_http_status_code())  # type: ignore[attr-defined]
    return None


def _is_transient_one(exc: BaseException) -> bool:
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    if isinstance(exc, OSError) and exc.errno in _TRANSIENT_ERRNOS:
        return True
    names = {cls.__name__ for cls in type(exc).__mro__}
    # requests', urllib3's and botocore's connection and timeout errors are not the built-in ones.
    if names & {"ConnectionError", "Timeout", "ConnectTimeoutError", "ReadTimeoutError"}:
        return True
    if "OperationalError" in names and "database is locked" in str(exc):  # sqlite3 or SQLAlchemy
        return True
    if getattr(exc, "error_code", None) in _TRANSIENT_MLFLOW_CODES:
        return True
    status = _http_status(exc)
    return status is not None and (status >= 500 or status == 429)


def is_transient(exc: BaseException) -> bool:
    """Whether trying again may succeed: a lost connection, a timeout, an HTTP 5xx (or 429), a locked
    database, anywhere in the chain of causes; a bug (TypeError, KeyError...) or a refusal is not."""
    return any(_is_transient_one(link) for link in _chain(exc))


def with_retries(fn: Callable[[], T], what: str, attempts: int = 6, delay_s: float = 0.2) -> T:
    """Run `fn`, retrying transient errors (`is_transient`) with backoff; anything else raises at once."""
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except Exception as exc:
            if attempt == attempts or not is_transient(exc):
                raise
            log.info("%s failed (%s); retry %d/%d", what, exc, attempt, attempts - 1)
            time.sleep(delay_s * (2 ** (attempt - 1)) * (1 + random.random()))
    raise AssertionError("unreachable")


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


# MLflow 3 opens an experiment without runs of a known kind in its GenAI view (traces); this tag,
# which the UI reads, makes it open on the runs table and charts, as a training experiment should.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"


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
    """The run's page in the MLflow UI (the tracking server serves it)."""
    uri = registry.settings.tracking_uri.rstrip("/")
    base = uri if uri.startswith("http") else "(MLflow UI: `mlflow ui`)"
    return f"{base}/#/experiments/{registry.experiment_id()}/runs/{run_id}"


def start_tracked_run(
    registry: PolicyRegistry, name: str, *, tags: dict[str, str], params: dict[str, object]
) -> str:
    """An MLflow run with its parameters and links to the Prefect flow run; its URL goes to the run's log."""
    from mlflow.entities import Param

    def start() -> str:
        experiment = registry.experiment_id()
        registry.client.set_experiment_tag(experiment, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
        return registry.start_run(name, tags=tags | prefect_links())

    run_id = with_retries(start, f"starting the MLflow run {name!r}")
    batch = [Param(k, str(v)[:500]) for k, v in sorted(params.items())]
    with_retries(lambda: registry.client.log_batch(run_id, params=batch), "logging params")
    _run_logger().info("MLflow run %s: %s", name, run_url(registry, run_id))
    return run_id


def _run_logger() -> logging.Logger | logging.LoggerAdapter:
    """The Prefect run's logger inside a flow or task run (shown in the UI), else this module's."""
    from prefect.exceptions import MissingContextError
    from prefect.logging import get_run_logger

    try:
        return get_run_logger()
    except MissingContextError:
        return log
