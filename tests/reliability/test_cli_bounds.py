"""Every number on the command line is checked before use, and every failure of a command is one
line (its traceback only with -v): a huge `--max-rows` ended in an OverflowError traceback, and
`distrl status` against an MLflow server that is down printed a page of traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ops.cli import main as cli
from tests.reliability.conftest import fill

ROOT = Path(__file__).resolve().parents[2]
HUGE = "99999999999999999999999"


def _run(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = cli(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["sql", "--max-rows", HUGE, "SELECT 1"], ["--max-rows", "<= 1000000000"]),
        (["fake-adb", "--seed", HUGE], ["--seed", "<= 4294967295"]),
        (["fake-adb", "--seed", "-3"], ["--seed", ">= 0"]),
        (["fake-adb", "--devices", HUGE], ["--devices", "<= 256"]),
        (["retrain", "--replay", "capacity_steps=1e400"], ["--replay", "capacity_steps", "finite"]),
        (["retrain", "--replay", "capacity_steps=NaN"], ["--replay", "capacity_steps", "finite"]),
        (["retrain", "--learner", f"batch_size={HUGE}"], ["--learner", "batch_size"]),
    ],
)
def test_a_number_out_of_range_is_one_line_naming_the_flag(
    argv, names, capsys, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    home = ["--home", str(tmp_path / "home")] if argv[0] == "retrain" else []
    code, err = _run([*argv, *home], capsys)
    errors = [line for line in err.splitlines() if "error:" in line]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert all(name in errors[0] for name in names), err


def test_the_largest_allowed_row_count_is_used(capsys, local_store) -> None:
    fill(local_store, 3)
    code = cli(["sql", "--store", local_store.uri, "--max-rows", "1000000000", "SELECT 42 AS answer"])
    out = capsys.readouterr().out
    assert code == 0 and "42" in out and "(1 rows)" in out


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens here once the socket is closed


def _status(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DISTRL_MLFLOW_TRACKING_URI": f"http://127.0.0.1:{_closed_port()}",
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",  # one refused connection is enough to know
    }
    return subprocess.run(
        [sys.executable, "-m", "ops.cli", *flags, "status", "--home", str(tmp_path / "home")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )


@pytest.mark.slow
def test_status_against_a_registry_that_is_down_is_one_line(tmp_path: Path) -> None:
    done = _status(tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and "127.0.0.1" in errors[0] and "-v" in errors[0], done.stderr
    verbose = _status(tmp_path, "-v")
    assert verbose.returncode == 1 and "Traceback" in verbose.stderr
    assert verbose.stderr.strip().splitlines()[-1].startswith("error:")
