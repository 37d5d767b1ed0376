"""Batched MLflow metric logging (one request per block of work, never per step)."""

from __future__ import annotations

import math
import time

from storage.registry import PolicyRegistry


def log_metrics(registry: PolicyRegistry, run_id: str, metrics: dict[str, float], *, step: int) -> None:
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    batch = [
        Metric(key, float(value), now, int(step))
        for key, value in metrics.items()
        if isinstance(value, int | float) and math.isfinite(float(value))
    ]
    if batch:
        registry.client.log_batch(run_id, metrics=batch)
