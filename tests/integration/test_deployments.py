"""The deployments of prefect.yaml, run for real: Prefect server, process workers, MLflow server, S3 (moto).

A learner worker (pool learner-gpu) and two collector workers (collectors-a, collectors-b) run the
`learn` and `collect` deployments against the S3 store and the MLflow server; an evaluation worker
then runs `evaluate`. Shards from both pools, the versions published and used, and the evaluation
are checked through SQL and the registry, as a person would check them.
"""

from __future__ import annotations

import itertools
import re
import time
from uuid import UUID

import pytest

from ops.up import Stack, read_deployments
from storage.registry import PolicyRegistry
from storage.sql_views import open_sql
from storage.store import open_store
from tests.integration.conftest import REPO, client_env

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.timeout(900)]

# Bounds passed at run time, on top of the deployments' own parameters (all of prefect.yaml's
# parameters go through the server's schema check on the way).
LEARNER = {
    "params": {
        "batch_size": 4,
        "updates_per_block": 4,
        # Six versions a few seconds apart: the evaluator `distrl up` started scores most of them
        # as they appear (it skips to the newest whenever two land during one evaluation).
        "publish_every_updates": 4,
        "max_updates": 24,
        "max_minutes": 4.0,
    },
    # Enough steps that the learner must ingest shards written after its first scan of a folder.
    "replay": {"min_size_steps": 400},
    "warm_start": {"family": "general", "updates": 5},
}
# An emulator-like step latency and batches of 8 episodes keep the task-run rate near a real fleet's
# (~1/s per collector): SimDroid at full speed makes ~5 task runs/s per collector, and the server's
# SQLite then answered 503 for minutes.
COLLECTOR = {
    "max_minutes": 2.0,
    "episodes_per_batch": 8,
    "flush_episodes": 8,
    "flush_seconds": 5.0,
    "step_latency_s": 0.1,
}


def _run(client, name: str, parameters: dict | None = None) -> UUID:
    deployment = client.read_deployment_by_name(name)
    merged = dict(deployment.parameters)
    for key, value in (parameters or {}).items():
        current = merged.get(key)
        merged[key] = (current | value) if isinstance(current, dict) and isinstance(value, dict) else value
    # A 503 (the server's SQLite locked for a while) is retried by the client (`Stack.api`).
    return client.create_flow_run_from_deployment(deployment.id, parameters=merged).id


def _wait(stack: Stack, client, run_ids: list[UUID], timeout_s: float) -> dict[UUID, object]:
    deadline = time.monotonic() + timeout_s
    while True:
        runs = {run_id: client.read_flow_run(run_id) for run_id in run_ids}
        if all(run.state is not None and run.state.is_final() for run in runs.values()):
            return runs
        if time.monotonic() > deadline:
            states = {run.name: run.state_name for run in runs.values()}
            pytest.fail(f"flow runs not finished after {timeout_s:.0f} s: {states}\n{_worker_logs(stack)}")
        time.sleep(2)


def _learner_curve(registry: PolicyRegistry, stack: Stack, timeout_s: float) -> list:
    """The learner's held-out curve drawn by the evaluator `distrl up` started (its protocol: the
    on-demand `evaluate` run plays other episodes, on a curve of its own), once it holds the last
    version (or the timeout passed)."""
    from tasks.evaluator import EvaluatorParams
    from tasks.heldout_curve import CURVE_ROLE, read_curve

    protocol = EvaluatorParams(**stack.config.evaluator_params).protocol
    deadline = time.monotonic() + timeout_s
    last = registry.resolve("latest")
    learner_run = registry.client.get_model_version(registry.name, str(last)).run_id
    while True:
        found = registry.client.search_runs(
            [registry.experiment_id()],
            f"tags.role = '{CURVE_ROLE}' and tags.training_run = '{learner_run}' and tags.protocol = '{protocol}'",
        )
        points = read_curve(registry, found[0].info.run_id) if found else []
        if (points and points[-1].version == last) or time.monotonic() > deadline:
            return points
        time.sleep(2)


def _task_run_names(client, flow_run_id: UUID) -> list[str]:
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
    return [run.name for run in runs]


def _worker_logs(stack: Stack) -> str:
    return "\n".join(
        f"--- {name} ---\n{proc.tail(25)}" for name, proc in stack.procs.items() if name.startswith("worker-")
    )


def test_prefect_yaml_names_every_role() -> None:
    deployments = {d["name"]: d for d in read_deployments(REPO)}
    assert {"collect-pool-a", "collect-pool-b", "learn", "evaluate", "evaluator", "retrain"} <= set(
        deployments
    )
    assert deployments["evaluator"]["work_pool"]["name"] == "evaluator"
    assert deployments["learn"]["work_pool"]["name"] == "learner-gpu"
    assert deployments["retrain"]["schedules"][0]["cron"]
    pools = {deployments[f"collect-pool-{p}"]["parameters"]["params"]["pool"] for p in "ab"}
    assert pools == {"pool_a", "pool_b"}
    for name in ("collect-pool-a", "collect-pool-b", "learn", "retrain", "evaluator"):
        assert deployments[name]["concurrency_limit"] == 1, name


def test_collectors_and_learner_across_work_pools(stack: Stack) -> None:
    started = time.monotonic()
    with stack.api() as client:
        retrain = client.read_deployment_by_name("retrain/retrain")
        assert [s.schedule.cron for s in retrain.schedules if s.active] == ["0 3 * * *"]
        learn_id = _run(client, "learn/learn", LEARNER)
        collect_ids = {
            pool: _run(client, f"collect/collect-pool-{pool}", {"params": COLLECTOR}) for pool in "ab"
        }
        _wait(stack, client, [learn_id], timeout_s=420)
        learned_s = time.monotonic() - started
        evaluate_id = _run(client, "evaluate/evaluate")
        runs = _wait(stack, client, [learn_id, evaluate_id, *collect_ids.values()], timeout_s=300)

    failed = {run.name: run.state_name for run in runs.values() if not run.state.is_completed()}
    assert not failed, f"{failed}\n{_worker_logs(stack)}"
    assert runs[learn_id].name == "learn-aride-24-updates" and runs[evaluate_id].name.startswith("evaluate-v")
    with stack.api() as client:
        collected = {p: _task_run_names(client, collect_ids[p]) for p in "ab"}
    assert runs[learn_id].work_pool_name == "learner-gpu"
    assert runs[evaluate_id].work_pool_name == "evaluation"
    assert {runs[collect_ids[p]].work_pool_name for p in "ab"} == {"collectors-a", "collectors-b"}

    with client_env(stack):
        registry = PolicyRegistry()
        versions = registry.versions()
        # Version 1 is the bootstrap's warm start; the learner published at least two more.
        assert registry.tags(1).get("warm_start") == "1"
        assert len(versions) >= 3, versions
        # Evaluation ran against the MLflow server: a champion, a held-out score and an MLflow run.
        champion = registry.resolve("champion")
        assert champion in versions
        assert "heldout_success" in registry.tags(champion)
        evaluations = registry.client.search_runs(
            [registry.experiment_id()], filter_string="tags.role = 'evaluation'"
        )
        assert evaluations and "heldout_success" in evaluations[0].data.metrics
        # Nobody asked for these: the evaluator that `distrl up` started scored the learner's versions
        # as they were published, onto the learner's held-out curve.
        points = _learner_curve(registry, stack, timeout_s=300)
        assert len(points) >= 3, points
        assert points[0].seconds == 0 and points[0].env_steps == 0  # the warm start
        assert all(
            b.seconds > a.seconds and b.env_steps >= a.env_steps for a, b in itertools.pairwise(points)
        )
        with stack.api() as client:
            evaluator_run = client.read_flow_run(UUID(stack.evaluator_run_id))
        assert evaluator_run.work_pool_name == "evaluator" and evaluator_run.state_name == "Running"

        store = open_store()
        assert store.uri.startswith("s3://")
        session = open_sql(store)
        try:
            per_pool = session.query(
                "SELECT pool, count(DISTINCT collector_id) AS collectors, count(*) AS steps "
                "FROM steps GROUP BY pool ORDER BY pool"
            ).to_pylist()
            per_version = session.query(
                "SELECT policy_version, count(*) AS steps FROM steps GROUP BY 1 ORDER BY 1"
            ).to_pylist()
            episodes = session.query("SELECT count(*) AS n FROM episodes").to_pylist()[0]["n"]
            per_pool_episodes = {
                row["pool"]: row["n"]
                for row in session.query("SELECT pool, count(*) AS n FROM episodes GROUP BY 1").to_pylist()
            }
        finally:
            session.close()
    print(
        f"stack {stack.timings}; learner done {learned_s:.0f} s, all runs {time.monotonic() - started:.0f} s"
    )
    print(f"steps per pool {per_pool}; per policy version {per_version}; versions {versions}")
    assert [row["pool"] for row in per_pool] == ["pool_a", "pool_b"], per_pool
    assert all(row["steps"] > 0 for row in per_pool)
    used = [row["policy_version"] for row in per_version]
    assert len(used) >= 2 and set(used) <= set(versions), per_version  # collectors swapped versions mid-run
    assert episodes > 0
    # A collector's task runs are blocks of batches named by what they did: their episodes add up
    # to the collector's, in fewer task runs than batches (one per batch before).
    for pool, names in collected.items():
        counts = [
            int(m.group(1)) for n in names if (m := re.fullmatch(r"collect (\d+) episodes \(v\d+\)", n))
        ]
        assert sum(counts) == per_pool_episodes[f"pool_{pool}"], (names, per_pool_episodes)
        batches = per_pool_episodes[f"pool_{pool}"] / COLLECTOR["episodes_per_batch"]
        assert len(counts) < batches, names
