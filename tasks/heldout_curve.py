"""The held-out curve of a training run: one MLflow run per (training run, evaluation protocol).

Every scored version adds one point: held-out success and its 95 % interval (overall and per
family) at step = policy version, and, at the same step, the point's other two x-axes as metrics of
their own: `seconds_since_learner_start` and `env_steps` (steps the learner had ingested when it
published the version). MLflow's chart editor can put any of the three on the x-axis; the step of
every metric of this run means "policy version" and nothing else.

A training run is the MLflow run that published the versions (the learner's); its starting version
(the warm start, or the champion a retrain fine-tunes) belongs to its curve at seconds 0, steps 0.
The curve run is finished when training ends (the evaluator closes it), so it is not left Running.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from storage.registry import PolicyRegistry
from tasks.mlflow_metrics import log_metrics, start_tracked_run
from tasks.retry import with_retries

CURVE_ROLE = "learning_curve"
CURVE_KEYS = ("heldout_success", "heldout_ci_low", "heldout_ci_high")
X_AXES = ("policy_version", "seconds_since_learner_start", "env_steps")
# Training runs that fine-tune on stored shards rather than learn while collecting (tasks/retrain.py).
RETRAINING_ROLES = ("retrain",)
# Version tags the learner writes when it publishes (tasks/learner.publish_policy).
SECONDS_TAG = "seconds_since_learner_start"
ENV_STEPS_TAG = "env_steps"


@dataclass(frozen=True)
class CurvePoint:
    """One scored version on a training run's curve."""

    version: int
    seconds: float  # since the learner started, when it published the version
    env_steps: int  # steps the learner had ingested by then
    success: float
    ci_low: float
    ci_high: float


def curve_metrics(report: dict) -> dict[str, float]:
    """Held-out success and its 95% interval, overall and per family (`heldout_success_general`...)."""
    metrics = {
        "heldout_success": report["success"],
        "heldout_ci_low": report["ci_low"],
        "heldout_ci_high": report["ci_high"],
    }
    for family, rate in report["families"].items():
        low, high = report.get("family_ci", {}).get(family, (float("nan"), float("nan")))
        metrics |= {
            f"heldout_success_{family}": rate,
            f"heldout_ci_low_{family}": low,
            f"heldout_ci_high_{family}": high,
        }
    return metrics


def axes_of(tags: dict[str, str], *, starting_version: bool = False) -> tuple[float, int]:
    """(seconds since the learner started, env steps) of a version, from its publish tags; a training
    run's starting version, and one published before these tags existed, sits at (0, 0)."""
    if starting_version:
        return 0.0, 0
    try:
        return float(tags.get(SECONDS_TAG, 0.0)), int(float(tags.get(ENV_STEPS_TAG, 0)))
    except ValueError:
        return 0.0, 0


def training_run_of(registry: PolicyRegistry, version: int) -> str | None:
    """The MLflow run that published `version` (a learner's, a warm start's, a retrain's)."""
    return registry.client.get_model_version(registry.name, str(version)).run_id or None


def curve_run(registry: PolicyRegistry, training_run: str, protocol: str) -> str:
    """The curve run of a training run and a protocol (scores of two protocols are not one curve),
    created on first use and named after the training run."""
    found = registry.client.search_runs(
        [registry.experiment_id()],
        f"tags.role = '{CURVE_ROLE}' and tags.training_run = '{training_run}' and tags.protocol = '{protocol}'",
        order_by=["attributes.start_time ASC"],
        max_results=1,
    )
    if found:
        return found[0].info.run_id
    source = registry.client.get_run(training_run)
    name = source.info.run_name or training_run[:8]
    return start_tracked_run(
        registry,
        f"held-out curve of {name} ({protocol})",
        tags={
            "role": CURVE_ROLE,
            "model": registry.name,
            "protocol": protocol,
            "training_run": training_run,
            "training_run_name": name,
            "training_role": source.data.tags.get("role", ""),
        },
        params={
            "model": registry.name,
            "protocol": protocol,
            "training_run": training_run,
            "x_axis.step": "policy version",
            "x_axis.metrics": ", ".join(X_AXES[1:]) + " (logged at the same step: pick one as the x-axis)",
        },
        owned=False,  # the evaluator finishes it when training ends, whichever process created it
    )


def log_point(
    registry: PolicyRegistry, report: dict, *, training_run: str, seconds: float, env_steps: int
) -> str:
    """Add a scored version to its training run's curve; returns the curve run's id."""
    version = int(report["version"])
    run = with_retries(
        lambda: curve_run(registry, training_run, report["protocol"]), "finding the held-out curve run"
    )
    metrics = curve_metrics(report) | {
        "policy_version": float(version),
        "seconds_since_learner_start": float(seconds),
        "env_steps": float(env_steps),
    }
    log_metrics(registry, run, metrics, step=version)
    return run


def read_curve(registry: PolicyRegistry, run_id: str) -> list[CurvePoint]:
    """The points of a curve run, by version (a version scored twice: the newest value wins)."""
    keys = (*CURVE_KEYS, "seconds_since_learner_start", "env_steps")
    rows: dict[int, dict[str, float]] = {}
    for key in keys:
        for point in registry.client.get_metric_history(run_id, key):
            rows.setdefault(point.step, {})[key] = point.value
    nan = math.nan
    return [
        CurvePoint(
            version=v,
            seconds=row.get("seconds_since_learner_start", nan),
            env_steps=int(row.get("env_steps", 0)),
            success=row.get("heldout_success", nan),
            ci_low=row.get("heldout_ci_low", nan),
            ci_high=row.get("heldout_ci_high", nan),
        )
        for v, row in sorted(rows.items())
    ]


def latest_curve_run(registry: PolicyRegistry, recent: int = 50) -> str | None:
    """The curve run of the newest training run that collects as it learns (what `distrl status`
    shows): a retrain's curve (its parent and its candidate, no env steps) only when no other exists
    among the `recent` newest curves."""
    found = registry.client.search_runs(
        [registry.experiment_id()],
        f"tags.role = '{CURVE_ROLE}'",
        order_by=["attributes.start_time DESC"],
        max_results=recent,
    )
    learning = [r for r in found if r.data.tags.get("training_role") not in RETRAINING_ROLES]
    chosen = (learning or found)[:1]
    return chosen[0].info.run_id if chosen else None


def curve_table(points: list[CurvePoint], champion: int | None) -> list[dict]:
    """The curve as rows for a Prefect table artifact and `distrl status`."""
    return [
        {
            "version": f"v{p.version}" + (" (champion)" if p.version == champion else ""),
            "minutes": f"{p.seconds / 60:.1f}",
            "env steps": str(p.env_steps),
            "held-out success": f"{p.success:.1%}",
            "95% CI": f"{p.ci_low:.1%}-{p.ci_high:.1%}",
        }
        for p in points
    ]
