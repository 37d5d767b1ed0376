from __future__ import annotations

from pathlib import Path

import pytest

from flows.train_local import TrainLocalParams, train_local
from storage.registry import PolicyRegistry
from storage.replay_config import ReplaySettings
from storage.sql_views import open_sql
from storage.store import open_store
from tasks.learner import LearnerParams


def _small_run(**overrides) -> TrainLocalParams:
    base = {
        "collectors": 2,
        "envs_per_collector": 4,
        "minutes": 3.0,  # a ceiling: the run ends when the learner has done max_updates
        "family": "general",
        "warm_start_updates": 5,
        "step_latency_s": 0.02,  # fewer, larger task runs: the test API server is SQLite-backed
        "learner": LearnerParams(updates_per_block=2, publish_every_updates=2, batch_size=4, max_updates=8),
        "replay": ReplaySettings(min_size_steps=20, samples_per_insert=None),
    }
    return TrainLocalParams(**(base | overrides))


@pytest.mark.slow
def test_async_run_publishes_versions_that_collectors_pick_up(embedded_home: Path) -> None:
    # The evaluator in its child process (the default) at the rest's niceness: at 19 (the default,
    # tests/flows/test_evaluator.py) it got next to no CPU beside the suite's other workers, and
    # the run's last evaluation held this test for minutes (244 s in a whole `make test`).
    result = train_local(_small_run(evaluator_nice=0), show_progress=False)
    published = result["learner"]["published"]
    assert len(published) >= 2, result["learner"]
    registry = PolicyRegistry()
    assert registry.versions()[0] == 1 and len(registry.versions()) == 1 + len(published)
    assert registry.tags(1)["warm_start"] == "1"
    # Evaluation ran on the warm start and the final version, and a champion exists.
    assert result["warm_start"]["version"] == 1 and result["final"]["version"] == registry.resolve("latest")
    assert registry.resolve("champion") in (1, registry.resolve("latest"))
    session = open_sql(open_store())
    per_pool = session.query("SELECT pool, count(*) AS n FROM episodes GROUP BY 1 ORDER BY 1").to_pylist()
    assert [row["pool"] for row in per_pool] == ["pool_a", "pool_b"]
    versions_used = session.query(
        "SELECT collector_id, count(DISTINCT policy_version) AS versions FROM steps GROUP BY 1"
    ).to_pylist()
    table = session.query(
        "SELECT collector_id, policy_version, count(*) AS n FROM steps GROUP BY 1, 2 ORDER BY 1, 2"
    )
    assert max(row["versions"] for row in versions_used) >= 2, (table.to_pylist(), result)  # swapped mid-run
    session.close()
    from ops.status import status_report

    # The continuous evaluator scored versions while it ran; the curve's axes are the learner's tags.
    curve = result["heldout_curve"]
    assert curve[0]["version"] == 1 and (curve[0]["seconds"], curve[0]["env_steps"]) == (0.0, 0)
    assert curve[-1]["version"] == registry.resolve("latest")
    for point in curve[1:]:
        tags = registry.tags(point["version"])
        assert point["seconds"] == pytest.approx(float(tags["seconds_since_learner_start"]))
        assert point["env_steps"] == int(tags["env_steps"]) > 0
    assert result["evaluator"]["scored"][-1] == registry.resolve("latest")
    report = status_report()
    assert "Held-out curve: held-out curve of learner" in report
    assert f"v{registry.resolve('latest')}" in report and "champion" in report
    assert "pool_a" in report and "Last evaluation" in report and "Learner learner" in report
