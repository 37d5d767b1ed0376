"""Two commands started at once on a fresh home raced on Prefect's and MLflow's SQLite tables
(`table concurrency_limit_v2 already exists`; alembic's `expected to match one row`). The first
start of a home now creates both databases under an exclusive lock in it (ops/embedded.py)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ops import embedded

ROOT = Path(__file__).resolve().parents[2]


def test_the_first_start_runs_once_and_never_twice_at_a_time(tmp_path: Path, monkeypatch) -> None:
    inside, calls, overlaps = [], [], []
    lock = threading.Lock()

    def slow_create() -> None:
        with lock:
            if inside:
                overlaps.append(1)
            inside.append(1)
        calls.append(1)
        time.sleep(0.3)
        with lock:
            inside.pop()

    monkeypatch.setattr(embedded, "_open_mlflow", slow_create)
    threads = [
        threading.Thread(target=embedded._first_start, args=(tmp_path,), kwargs={"prefect": False})
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [1] and overlaps == []
    assert (tmp_path / f"{embedded.FIRST_START_DONE}.mlflow").read_text()  # the version that created it
    embedded._first_start(tmp_path, prefect=False)
    assert calls == [1]  # done once per home and version


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_commands_on_a_fresh_home_both_start(tmp_path: Path) -> None:
    """Both reach the registry (and find it empty: the one-line error of an empty registry)."""
    home = tmp_path / "home"
    argv = [sys.executable, "-m", "ops.cli", "retrain", "--home", str(home), "--updates", "1"]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    procs = [
        subprocess.Popen(
            argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=800)[0] for proc in procs]
    for proc, output in zip(procs, outputs, strict=True):
        assert "already exists" not in output and "alembic" not in output, output[-3000:]
        assert proc.returncode == 2, output[-3000:]
        assert output.strip().splitlines()[-1].startswith("error: no policy version for 'champion'"), output[
            -3000:
        ]
    assert {p.name for p in home.glob(".first-start.*")} >= {".first-start.prefect", ".first-start.mlflow"}
