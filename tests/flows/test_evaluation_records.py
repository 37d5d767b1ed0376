"""What the evaluations leave in MLflow and Prefect, as a person reads them: one `evaluate-vN` run per
version and protocol however many flows score it, the curve artifact's description naming and
linking its MLflow run (nothing in angle brackets for Prefect's renderer to swallow), a link to the
curve on the evaluating flow run's page, `distrl status`'s curve being the learner's after a retrain,
and a curve's starting version with its per-family points."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from prefect import flow

from distrl_core.policy import save_policy
from distrl_core.policy.config import PolicyConfig
from distrl_core.policy.model import Policy
from storage.registry import PolicyRegistry
from tasks.curve_links import LINK_KEY
from tasks.evaluation import OUTCOMES_TAG, PROTOCOL_TAG, record_evaluation
from tasks.evaluator import report_from_tags
from tasks.heldout_curve import latest_curve_run

pytestmark = pytest.mark.slow
PROTOCOL = "test:general:1x:seed12345"


def _report(version: int, outcomes: str) -> dict:
    wins = outcomes.count("1") / len(outcomes)
    return {
        "version": version,
        "split": "test",
        "family": "general",
        "seed": 12345,
        "protocol": PROTOCOL,
        "episodes": len(outcomes),
        "episodes_per_task": 1,
        "success": wins,
        "ci_low": max(0.0, wins - 0.2),
        "ci_high": min(1.0, wins + 0.2),
        "families": {"general": wins},
        "family_ci": {"general": (max(0.0, wins - 0.2), min(1.0, wins + 0.2))},
        "outcomes": outcomes,
    }


@flow
def _record(reports: list[dict], training_run: str | None = None) -> None:
    for report in reports:
        record_evaluation(report, training_run=training_run)


def _artifacts(key: str) -> list:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        return client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))


def test_evaluations_as_mlflow_and_prefect_show_them(embedded_home: Path) -> None:
    registry = PolicyRegistry()
    learner = registry.start_run("learner", tags={"role": "learner"})
    with tempfile.TemporaryDirectory() as tmp:
        path = save_policy(Policy.create(PolicyConfig()), Path(tmp) / "policy")
        v1, v2 = (registry.publish(path, run_id=learner) for _ in range(2))
        retrain = registry.start_run("retrain", tags={"role": "retrain", "parent_version": str(v2)})
        v3 = registry.publish(path, run_id=retrain)

    # The continuous evaluator scores v1 and v2; a retrain scores v2 again (its champion), then v3.
    _record([_report(v1, "0101"), _report(v2, "0111")], training_run=learner)
    _record([_report(v2, "0111"), _report(v3, "0011")])

    runs = registry.client.search_runs([registry.experiment_id()], "tags.role = 'evaluation'")
    names = sorted(r.info.run_name for r in runs)
    assert names == sorted(f"evaluate-v{v}" for v in (v1, v2, v3)), names

    learner_curve = latest_curve_run(registry)
    assert learner_curve is not None
    curve = registry.client.get_run(learner_curve)
    assert curve.data.tags["training_run"] == learner  # not the retrain's newer 1-point curve

    table = _artifacts("heldout-learning-curve")
    assert table
    description = table[0].description
    assert "<" not in description and "held-out curve of " in description
    assert "workflowType=machine_learning" in description  # a link to the MLflow run
    links = _artifacts(LINK_KEY)
    assert links and all("workflowType=machine_learning" in a.data for a in links)
    assert any(curve.info.run_id in a.data for a in links)

    tags = registry.tags(v1)
    assert tags[PROTOCOL_TAG] == PROTOCOL and tags[OUTCOMES_TAG] == "0101"
    rebuilt = report_from_tags(v1, tags, PROTOCOL, registry)
    assert rebuilt is not None and rebuilt["families"] == {"general": 0.5}
    assert rebuilt["family_ci"]["general"] == pytest.approx((0.3, 0.7))
