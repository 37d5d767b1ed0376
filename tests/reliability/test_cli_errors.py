"""Bad command lines and bad `DISTRL_*` variables: one line naming the flag or
variable and the fix, exit code 2, no traceback (unless -v)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ops.cli import main as cli

ROOT = Path(__file__).resolve().parents[2]


def _run(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = cli(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    return code, capsys.readouterr().err


def _one_line_error(err: str, *names: str) -> None:
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert all(name in errors[0] for name in names), err


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["sql", "SELECT 1", "--store", "ftp://host/store"], ["--store", "s3://"]),
        (["sql", "SELECT 1", "--store", "s3://ab"], ["--store", "3 characters"]),
        (["sql", "SELECT 1", "--max-rows", "-5"], ["--max-rows", ">= 0"]),
        (["demo", "--minutes", "-1"], ["--minutes", "> 0"]),
        (["train-local", "--collectors", "0"], ["--collectors", ">= 1"]),
        (["train-local", "--minutes", "nan"], ["--minutes"]),
        (["fake-adb", "--port", "70000"], ["--port", "0-65535"]),
        (["fake-adb", "--port", "adb"], ["--port"]),
        (["fake-adb", "--devices", "0"], ["--devices"]),
    ],
)
def test_bad_flags(argv: list[str], names: list[str], capsys) -> None:
    code, err = _run(argv, capsys)
    assert code == 2
    _one_line_error(err, *names)


def test_bad_learner_override_and_bad_replay_variable(tmp_path) -> None:
    """In child processes (both at once): these commands import Prefect, whose logging setup takes
    over the root logger of the process it is imported in."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    home = ["--home", str(tmp_path / "home")]
    runs = {
        ("--learner", "actor_lr", "number"): ([*home, "--learner", "actor_lr=abc"], "retrain", {}),
        ("DISTRL_REPLAY_DUCKDB_THREADS", ">= 1"): (
            [*home, "--minutes", "0.1"],
            "train-local",
            {"DISTRL_REPLAY_DUCKDB_THREADS": "0"},
        ),
    }
    children = {
        names: subprocess.Popen(
            [sys.executable, "-m", "ops.cli", command, *argv],
            env=env | extra,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for names, (argv, command, extra) in runs.items()
    }
    for names, child in children.items():
        _, err = child.communicate(timeout=300)
        assert child.returncode == 2, err
        _one_line_error(err, *names)


def test_misspelled_variables_are_reported(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("DISTRL_REPLAY_MIN_PRIORTY", "0.5")
    monkeypatch.setenv("DISTRL_STORE_URL", "s3://bucket/x")
    (tmp_path / "store").mkdir()
    code, err = _run(["sql", "SELECT 1 AS one", "--store", str(tmp_path / "store")], capsys)
    assert code == 0
    assert "DISTRL_REPLAY_MIN_PRIORTY is not used (did you mean DISTRL_REPLAY_MIN_PRIORITY?)" in err
    assert "DISTRL_STORE_URL is not used (did you mean DISTRL_STORE_URI?)" in err


def test_verbose_shows_the_traceback(capsys) -> None:
    code, err = _run(["-v", "sql", "SELECT 1", "--store", "ftp://host/store"], capsys)
    assert code == 2 and "Traceback" in err and err.rstrip().splitlines()[-1].startswith("error: --store")


def test_a_busy_fake_adb_port(tmp_path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "ops.cli", "fake-adb", "--port", str(port), "--console-port", "0"],
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 2
    _one_line_error(done.stderr, f"--port {port}", "in use")


def test_a_busy_fake_adb_console_port(tmp_path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "ops.cli", "fake-adb", "--port", "0", "--console-port", str(port)],
            env=dict(os.environ, PYTHONPATH=str(ROOT), HOME=str(tmp_path)),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 2
    _one_line_error(done.stderr, f"--console-port {port}", "in use")
