"""The `evaluate` flow: a policy version (or alias) on the held-out split; promotes `champion`."""

from __future__ import annotations

from prefect import flow

from storage.registry import PolicyRegistry
from tasks.evaluation import evaluate_version, record_evaluation


@flow(name="evaluate")
def evaluate(policy: str = "latest", split: str = "test", family: str | None = None) -> dict:
    version = PolicyRegistry().resolve(policy)
    if version is None:
        raise LookupError(f"no policy version for {policy!r}: publish one first")
    report = evaluate_version(version, split=split, family=family)
    report["promoted"] = record_evaluation(report)
    return report
