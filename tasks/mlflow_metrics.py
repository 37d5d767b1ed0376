"""Batched MLflow metric logging (one request per block of work, never per step).

Metrics never stop a collector or the learner: a busy tracking store (SQLite is locked while
another thread writes) is retried with backoff, then skipped with a warning.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable
from typing import TypeVar

from storage.registry import PolicyRegistry

log = logging.getLogger(__name__)
T = TypeVar("T")


def with_retries(fn: Callable[[], T], what: str, attempts: int = 6, delay_s: float = 0.2) -> T:
    """Run `fn`, retrying transient tracking-store errors (e.g. 'database is locked') with backoff."""
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except Exception as exc:
            if attempt == attempts:
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
