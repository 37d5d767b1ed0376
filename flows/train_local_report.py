"""What `train_local` reports once its RL phase ends: the last version's held-out and
in-distribution scores, the continuous evaluator's summary and the learner's held-out curve."""

from __future__ import annotations

from typing import Any

from simulators.evaluation import IN_DISTRIBUTION_SEED
from storage.registry import PolicyRegistry
from tasks.evaluation import evaluate_version, in_distribution_split, record_evaluation
from tasks.evaluator import EvaluatorParams


def final_report(
    final: int, baseline: dict | None, evaluated: dict[str, Any] | None, protocol: EvaluatorParams
) -> dict | None:
    """The last version's held-out report (the evaluator's, else evaluated now) and, beside it, its
    success on the tasks trained on beside the held-out ones under fresh seeds."""
    if baseline is None:
        return None
    reports = (evaluated or {}).get("summary", {}).get("reports", {})
    if final == baseline["version"]:
        return baseline
    report = reports.get(final)
    if report is None:
        report = evaluate_version(final, **protocol.evaluation_args(), in_distribution=False)
        record_evaluation(report)
    inside = evaluate_version(final, **in_distribution_args(protocol), in_distribution=False)
    return report | {"in_distribution": {k: v for k, v in inside.items() if k in (*_SUMMARY_KEYS, "split")}}


def in_distribution_args(protocol: EvaluatorParams) -> dict[str, Any]:
    """`evaluate_version`'s arguments for the tasks trained on beside the held-out ones: the
    protocol's own (its observation above all: a screen-observed run is scored on the screen), one
    episode per task under fresh seeds."""
    return protocol.evaluation_args() | {
        "split": in_distribution_split(protocol.split),
        "seed": IN_DISTRIBUTION_SEED,
        "episodes_per_task": 1,
    }


_SUMMARY_KEYS = ("success", "ci_low", "ci_high", "episodes", "episodes_per_task", "families", "family_ci")


def heldout_curve(registry: PolicyRegistry, final: int, protocol: EvaluatorParams) -> list[dict]:
    """The learner's held-out curve as the evaluator recorded it: version, seconds since the learner
    started, env steps, success and its interval (empty when nothing was published)."""
    from dataclasses import asdict

    from tasks.heldout_curve import curve_run, read_curve, training_run_of

    training_run = training_run_of(registry, final)
    if training_run is None:
        return []
    return [asdict(p) for p in read_curve(registry, curve_run(registry, training_run, protocol.protocol))]


def evaluator_summary(evaluated: dict[str, Any] | None) -> dict[str, Any] | None:
    if evaluated is None:
        return None
    summary = evaluated.get("summary") or {}
    return {
        "scored": summary.get("scored", []),
        "skipped": summary.get("skipped", []),
        "promoted": summary.get("promoted", []),
        "error": evaluated.get("error"),
    }
