"""The `evaluate` flow: a policy version (or alias) on the held-out split; promotes `champion`."""

from __future__ import annotations

import contextlib
from uuid import UUID

from prefect import flow

from storage.registry import PolicyRegistry
from tasks.evaluation import evaluate_version, record_evaluation


def _run_name() -> str:
    from prefect.runtime import flow_run

    policy = flow_run.get_parameters().get("policy", "latest")
    return f"evaluate-v{policy}" if str(policy).isdigit() else f"evaluate-{policy}"


def _rename_run(name: str) -> None:
    """`evaluate-latest` becomes `evaluate-v6` once the alias is resolved (a name is only a label)."""
    from prefect.client.orchestration import get_client
    from prefect.runtime import flow_run

    run_id = flow_run.get_id()
    if run_id:
        with contextlib.suppress(Exception), get_client(sync_client=True) as client:
            client.update_flow_run(UUID(run_id), name=name)


@flow(name="evaluate", flow_run_name=_run_name)
def evaluate(policy: str | int = "latest", split: str = "test", family: str | None = None) -> dict:
    """Held-out success of a policy version, logged to MLflow; moves `champion` when it is better.

    Args:
        policy: registry alias (`latest`, `champion`) or version number (6 or "6").
        split: task split to evaluate on (`test` is held out from training).
        family: task family (`general`, `webshop`); None evaluates both.
    """
    version = PolicyRegistry().resolve(policy)
    if version is None:
        raise LookupError(f"no policy version for {policy!r}: publish one first")
    if str(policy) != str(version):
        _rename_run(f"evaluate-v{version}")
    report = evaluate_version(version, split=split, family=family)
    report["promoted"] = record_evaluation(report)  # logs the result and the champion
    return report
