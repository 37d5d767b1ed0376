"""`distrl up --database postgres` for real: the stack starts PostgreSQL itself (ops/postgres.py),
runs the Prefect and MLflow servers on it, and a learner and two collectors run through the work
pools. Their flow runs and the published versions are then read from PostgreSQL's own tables; no
server log says "database is locked", none holds the password, and PostgreSQL stops with the stack.

Skips, saying why, without PostgreSQL's server programs (`make postgres-deps` installs them)."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from ops import postgres
from ops.up import Stack, UpConfig
from storage.registry import PolicyRegistry
from tests.integration.conftest import REPO, client_env
from tests.integration.test_deployments import _run, _wait, _worker_logs

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.timeout(900)]

LEARNER = {
    "params": {
        "batch_size": 4,
        "updates_per_block": 4,
        "publish_every_updates": 4,
        "max_updates": 8,
        "max_minutes": 4.0,
    },
    "replay": {"min_size_steps": 100},
    "warm_start": {"family": "general", "updates": 2},
}
COLLECTOR = {"max_minutes": 1.0, "episodes_per_batch": 8, "flush_episodes": 8, "flush_seconds": 5.0}


@pytest.fixture(scope="module")
def pg_stack() -> Iterator[Stack]:
    try:
        postgres.find_bin_dir(postgres.PostgresSettings().bin_dir)
    except postgres.PostgresMissing as exc:
        pytest.skip(str(exc))
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(postgres.PostgresSettings().os_user)
        except KeyError:
            pytest.skip("running as root and there is no `postgres` user for PostgreSQL (it refuses root)")
    # As root the server runs as `postgres`, which must be able to enter the folder: pytest's own
    # temporary folders are private to root.
    run_dir = Path(tempfile.mkdtemp(prefix="distrl-pg-"))
    run_dir.chmod(0o755)
    config = UpConfig(
        run_dir=run_dir,
        project_dir=REPO,
        database="postgres",
        ui=False,
        evaluator=False,
        worker_query_seconds=2,
        worker_env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
    )
    try:
        with Stack(config) as started:
            yield started
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def test_flow_runs_and_versions_live_in_postgres(pg_stack: Stack) -> None:
    stack = pg_stack
    server = stack.database
    assert server is not None and "postgres" in stack.procs
    database_proc = stack.procs["postgres"]
    with stack.api() as client:
        run_ids = [_run(client, "learn/learn", LEARNER)]
        run_ids += [_run(client, f"collect/collect-pool-{p}", {"params": COLLECTOR}) for p in "ab"]
        runs = _wait(stack, client, run_ids, timeout_s=600)
    failed = {run.name: run.state_name for run in runs.values() if not run.state.is_completed()}
    assert not failed, f"{failed}\n{_worker_logs(stack)}"
    with client_env(stack):
        versions = PolicyRegistry().versions()
    assert len(versions) >= 2, versions  # the warm start and at least one of the learner's

    # Prefect's and MLflow's own tables, read from PostgreSQL rather than through their APIs.
    with postgres.connect(server, postgres.PREFECT_DB) as conn:
        rows = conn.execute(
            "SELECT id, state_type FROM flow_run WHERE id = ANY(%s)", [list(run_ids)]
        ).fetchall()
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
