"""The `evaluate` flow: a policy version (or alias) on the held-out split; promotes `champion`."""

from __future__ import annotations

from prefect import flow

from storage.registry import PolicyRegistry
from tasks.evaluation import evaluate_version, record_evaluation


@flow(name="evaluate")
def evaluate(policy: str = "latest", split: str = "test", family: str | None = None) -> dict:
    """Held-out success of a policy version, logged to MLflow; moves `champion` when it is better.

    Args:
        policy: registry alias (`latest`, `champion`) or version number.
        split: task split to evaluate on (`test` is held out from training).
        family: task family (`general`, `webshop`); None evaluates both.
    """
    version = PolicyRegistry().resolve(policy)
    if version is None:
        raise LookupError(f"no policy version for {policy!r}: publish one first")
    report = evaluate_version(version, split=split, family=family)
    report["promoted"] = record_evaluation(report)
    return report
