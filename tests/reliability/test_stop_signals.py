"""`distrl train-local` stops cleanly on SIGTERM and Ctrl-C, and a kill -9 leaves
no server behind and no MLflow run RUNNING for good.

Real processes: the CLI as a subprocess with its embedded Prefect server and MLflow on SQLite. The
waits are liveness bounds (a hung process fails the test instead of hanging it), not timings.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import psutil
import pytest

from bench.integrity_probes import (
    process_runs,
    start_train_local,
    stored_shards,
    train_local_log,
    wait_for,
)

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_train_local_cleanly(tmp_path: Path, signum: int) -> None:
    home = tmp_path / "home"
    proc = start_train_local(home)
    try:
        wait_for(lambda: len(stored_shards(home)) > 0, "shard", proc)
        proc.send_signal(signum)
        try:
            code = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"train-local still running 120 s after the signal:\n{train_local_log(home)}")
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 128 + signum, train_local_log(home)
    runs = process_runs(home)
    assert runs and all(r.info.status != "RUNNING" for r in runs), train_local_log(home)
    assert stored_shards(home)


def test_kill_9_leaves_no_server_and_the_next_start_fails_itsprocess_runs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = start_train_local(home)
    try:
        wait_for(lambda: len(stored_shards(home)) > 0, "shard", proc)
        children = psutil.Process(proc.pid).children(recursive=True)
        assert children, "the embedded Prefect server is a child process"
        proc.kill()
        proc.wait(timeout=30)
        _, alive = psutil.wait_procs(children, timeout=60)
        assert not alive, [p.cmdline() for p in alive]
    finally:
        if proc.poll() is None:
            proc.kill()
    stale = [r for r in process_runs(home) if r.info.status == "RUNNING"]
    assert stale  # what the killed process left behind
    os.environ.update(DISTRL_MLFLOW_TRACKING_URI=f"sqlite:///{home / 'mlflow.db'}")
    try:
        from storage import registry as registry_module
        from storage.registry import PolicyRegistry, RegistrySettings

        registry_module._swept.clear()
        registry = PolicyRegistry(
            RegistrySettings(tracking_uri=f"sqlite:///{home / 'mlflow.db'}", cache_dir=str(tmp_path / "c"))
        )
        registry.start_run("next-start")
    finally:
        del os.environ["DISTRL_MLFLOW_TRACKING_URI"]
    status = {r.info.run_id: r.info.status for r in process_runs(home)}
    assert all(status[r.info.run_id] == "FAILED" for r in stale)
