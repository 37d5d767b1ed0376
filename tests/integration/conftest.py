"""The whole distributed setup on loopback, started by the same code as `distrl up`.

Every server and worker is a subprocess of this session on a free port; the fixture's teardown
stops them all, with the flow runs they spawned, whatever the test did.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.faults_lease import CANARIES
from ops import postgres
from ops.cli_flows import environment_kept
from ops.up import Stack, UpConfig
from tests.prefect_services import forget_prefect_workers

REPO = Path(__file__).resolve().parents[2]
# The canaries the `stack` fixture's process held while the stack started (its children were
# spawned then): what test_deployments.py's allowlist test looks for in every child's environment.
CANARIES_AT_START: dict[str, str] = {}


def postgres_unavailable() -> str | None:
    """Why this machine cannot run `distrl up --database postgres`, or None."""
    try:
        postgres.find_bin_dir(postgres.PostgresSettings().bin_dir)
    except postgres.PostgresMissing as exc:
        return str(exc)
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(postgres.PostgresSettings().os_user)
        except KeyError:
            return "running as root and there is no `postgres` user for PostgreSQL (it refuses root)"
    return None


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    """One stack for test_deployments.py's three checks (the deployments across work pools, the
    children's allowlist, PostgreSQL's tables): each was a stack start-up of its own (~100 s).

    - On PostgreSQL where this machine has it (what `distrl up`'s default picks there), else on
      SQLite, as `auto` would; the PostgreSQL test then skips, saying why.
    - Started with credential canaries in this process's environment, removed once it has started:
      every server, worker and flow-run process is spawned during the start or by a worker, so none
      may hold one; the test process's own later calls do not carry them.
    """
    # As root the database server runs as `postgres`, which must be able to enter the folder:
    # pytest's own temporary folders are private to root.
    run_dir = Path(tempfile.mkdtemp(prefix="distrl-up-"))
    run_dir.chmod(0o755)
    config = UpConfig(
        run_dir=run_dir,
        project_dir=REPO,
        database="auto" if postgres_unavailable() else "postgres",
        ui=False,
        worker_query_seconds=2,
        # One torch thread per flow run: four flow runs share two cores here.
        worker_env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
        # The continuous evaluator starts with the stack; one episode per task keeps it light here.
        evaluator_params={"episodes_per_task": 1, "poll_seconds": 1.0},
    )
    started = Stack(config)
    try:
        with pytest.MonkeyPatch.context() as patch:
            for name, value in CANARIES.items():
                patch.setenv(name, value)
            CANARIES_AT_START.update({name: os.environ[name] for name in CANARIES})
            started.start()
        yield started
    finally:
        started.stop()
        shutil.rmtree(run_dir, ignore_errors=True)


@contextlib.contextmanager
def client_env(stack: Stack) -> Iterator[None]:
    """This process as one more machine of the setup (for `distrl sql` and the registry); Prefect's
    event and log workers of this process follow it to the stack's server and are dropped after."""
    with environment_kept():
        os.environ.update(stack.client_env())
        os.environ["DISTRL_MLFLOW_CACHE_DIR"] = str(stack.run_dir / "test-cache")
        forget_prefect_workers()
        try:
            yield
        finally:
            forget_prefect_workers()
