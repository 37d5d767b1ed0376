"""The deployments of prefect.yaml, run for real: Prefect server, process workers, MLflow server, S3 (moto).

A learner worker (pool learner-gpu) and two collector workers (collectors-a, collectors-b) run the
`learn` and `collect` deployments against the S3 store and the MLflow server; an evaluation worker
then runs `evaluate`. Shards from both pools, the versions published and used, and the evaluation
are checked through SQL and the registry, as a person would check them.

The same stack (the module's `stack`, tests/integration/conftest.py: one start-up instead of
three) then answers two more questions, in this order: no credential of the starting process
reached any child (test_up_allowlist.py's unit test checks the allowlists themselves), and on
PostgreSQL the flow runs and versions live in its tables and it stops with the stack (the last
test: it stops the stack).
"""

from __future__ import annotations

import itertools
import re
import time
from pathlib import Path
from uuid import UUID

import psutil
import pytest

from bench.faults_lease import CANARIES, CANARY_PARTS
from ops import postgres
from ops.up import Stack, read_deployments
from storage.registry import PolicyRegistry
from storage.sql_views import open_sql
from storage.store import open_store
from tests.integration.conftest import CANARIES_AT_START, REPO, client_env, postgres_unavailable

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

# The flow runs test_collectors_and_learner_across_work_pools saw complete (learn, evaluate and both
# collectors): the PostgreSQL test reads them back from PostgreSQL's tables instead of running more.
FINISHED: list[UUID] = []
# The PostgreSQL test's own runs when it runs alone (after the deployments test it reads its runs).
PG_LEARNER = {
    "params": {**LEARNER["params"], "max_updates": 8},
    "replay": {"min_size_steps": 100},
    "warm_start": {"family": "general", "updates": 2},
}
PG_COLLECTOR = {"max_minutes": 1.0, "episodes_per_batch": 8, "flush_episodes": 8, "flush_seconds": 5.0}


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


def _family(stack: Stack) -> list[psutil.Process]:
    found = []
    for proc in stack.procs.values():
        try:
            root = psutil.Process(proc.pid)
            found += [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
    return found


def _environ(proc: psutil.Process) -> str:
    """NUL-separated, with a leading NUL: `\0NAME=` finds a variable by its whole name."""
    try:
        return "\0" + Path(f"/proc/{proc.pid}/environ").read_bytes().decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return ""


def _environs(family: list[psutil.Process]) -> dict[str, str]:
    """Each living process's environment under "pid command": a short-lived child (a flow run's
    subprocess) may exit between listing and reading, and one that is gone has nothing to leak."""
    found = {}
    for proc in family:
        try:
            found[f"{proc.pid} {' '.join(proc.cmdline()[:6])}"] = _environ(proc)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return found


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
    FINISHED.extend(runs)
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


def test_no_canary_reaches_any_child_and_the_stack_still_runs_a_flow(stack: Stack) -> None:
    """`distrl up` children inherit by allowlist, per role (ops/up_env.py): HF_TOKEN, GITHUB_TOKEN,
    MLFLOW_TRACKING_PASSWORD, PREFECT_API_KEY, PREFECT_API_AUTH_STRING, legacy AWS_ACCESS_KEY, a
    password inside MLFLOW_TRACKING_URI and an unknown variable all reached moto, MLflow, the Prefect
    server and every worker through a denylist. The stack was started with them in the environment
    (the fixture); none is in any child's /proc/<pid>/environ, and a worker runs a flow."""
    # The continuous evaluator is a flow run that a worker started: wait until it runs (after the
    # test above it already does).
    deadline = time.monotonic() + 300
    while True:
        with stack.api() as client:
            state = client.read_flow_run(UUID(stack.evaluator_run_id)).state
        if state is not None and state.is_running():
            break
        assert state is None or not state.is_final(), state
        assert time.monotonic() < deadline, f"the evaluator's flow run never started: {state}"
        time.sleep(2)
    environs = _environs(_family(stack))
    workers = [name for name in stack.procs if name.startswith("worker-")]
    assert len(workers) == 5 and len(environs) >= 3 + 5 + 1, sorted(environs)
    assert any("\0DISTRL_STORE_URI=s3://" in text for text in environs.values())  # the stack's own
    # Values, not names: the MLflow server sets its own MLFLOW_TRACKING_URI for its workers.
    needles = [*CANARIES.values(), *CANARY_PARTS]
    leaks = {where: sorted(n for n in needles if n in text) for where, text in environs.items()}
    assert {where: found for where, found in leaks.items() if found} == {}
    assert CANARIES_AT_START == CANARIES  # the canaries were there to leak


def test_flow_runs_and_versions_live_in_postgres(stack: Stack) -> None:
    """`distrl up --database postgres` for real: the stack starts PostgreSQL itself (ops/postgres.py)
    and runs the Prefect and MLflow servers on it; the learner's and collectors' flow runs (the
    test above's, or, run alone, three of its own) and the published versions are read from
    PostgreSQL's own tables; no server log says "database is locked", none holds the password, and
    PostgreSQL stops with the stack. Last in this module: it stops the stack. Skips, saying why,
    without PostgreSQL's server programs (`make postgres-deps` installs them)."""
    reason = postgres_unavailable()
    if reason is not None:
        pytest.skip(reason)
    server = stack.database
    assert server is not None and "postgres" in stack.procs
    database_proc = stack.procs["postgres"]
    run_ids = list(FINISHED)
    if not run_ids:  # this test alone: a learner and two collectors of its own, briefly
        with stack.api() as client:
            run_ids = [_run(client, "learn/learn", PG_LEARNER)]
            run_ids += [_run(client, f"collect/collect-pool-{p}", {"params": PG_COLLECTOR}) for p in "ab"]
            runs = _wait(stack, client, run_ids, timeout_s=600)
        failed = {run.name: run.state_name for run in runs.values() if not run.state.is_completed()}
        assert not failed, f"{failed}\n{_worker_logs(stack)}"
    with client_env(stack):
        versions = PolicyRegistry().versions()
    assert len(versions) >= 2, versions  # the warm start and at least one of the learner's

    # Prefect's and MLflow's own tables, read from PostgreSQL rather than through their APIs.
    with postgres.connect(server, postgres.PREFECT_DB) as conn:
        rows = conn.execute("SELECT id, state_type FROM flow_run WHERE id = ANY(%s)", [run_ids]).fetchall()
    assert {(row[0], row[1]) for row in rows} == {(run_id, "COMPLETED") for run_id in run_ids}, rows
    with postgres.connect(server, postgres.MLFLOW_DB) as conn:
        stored = [
            row[0] for row in conn.execute("SELECT version FROM model_versions ORDER BY version").fetchall()
        ]
    assert stored == sorted(versions), stored
    # Neither server made a SQLite file of its own.
    assert not list(stack.run_dir.rglob("*.db")), list(stack.run_dir.rglob("*.db"))

    logs = {path.name: path.read_text(errors="replace") for path in (stack.run_dir / "logs").glob("*.log")}
    assert {"prefect.log", "mlflow.log", "postgres.log"} <= set(logs), sorted(logs)
    assert not [name for name, text in logs.items() if "database is locked" in text]
    described = stack.describe()
    assert f"PostgreSQL {server.host}:{server.port}" in described
    for name, text in {
        **logs,
        "describe": described,
        "state.json": (stack.run_dir / "state.json").read_text(),
        "env.sh": (stack.run_dir / "env.sh").read_text(),
    }.items():
        assert server.password not in text, name
    assert all(server.password not in " ".join(proc.argv) for proc in stack.procs.values())

    stack.stop()  # PostgreSQL last, once the servers are gone
    assert not psutil.pid_exists(database_proc.pid) or psutil.Process(database_proc.pid).status() == "zombie"
    assert "database system is shut down" in database_proc.log_path.read_text()
