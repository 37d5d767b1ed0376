"""The whole distributed setup on loopback, started by the same code as `distrl up`.

Every server and worker is a subprocess of this session on a free port; the fixture's teardown
stops them all, with the flow runs they spawned, whatever the test did.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ops.cli_flows import environment_kept
from ops.up import Stack, UpConfig
from tests.prefect_services import forget_prefect_workers

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    config = UpConfig(
        run_dir=tmp_path_factory.mktemp("up"),
        project_dir=REPO,
        ui=False,
        worker_query_seconds=2,
        # One torch thread per flow run: four flow runs share two cores here.
        worker_env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
        # The continuous evaluator starts with the stack; one episode per task keeps it light here.
        evaluator_params={"episodes_per_task": 1, "poll_seconds": 1.0},
    )
    with Stack(config) as started:
        yield started


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
