"""The CLI run inside another process leaves that process's logging as it found it:
`test_sql_bypass.py::...[s3]` failed with "Logging error ... I/O operation on closed file" when
run after `test_cli_errors.py`, whose `train-local` call imported Prefect, whose console handler on
the root logger kept pytest's captured stderr of that test, closed since."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import contextlib, io, logging, sys
    from ops.cli import main
    before = list(logging.getLogger().handlers), logging.getLogger().level
    captured = io.StringIO()
    with contextlib.redirect_stderr(captured):
        try:
            main(["train-local", "--collectors", "0"])  # imports Prefect, then fails on the flag
        except SystemExit:
            pass
    captured.close()  # as pytest closes a finished test's capture
    logging.getLogger("werkzeug").warning("a record after the command")
    after = list(logging.getLogger().handlers), logging.getLogger().level
    print("same" if after == before else f"changed: {before} -> {after}")
    """
)


def test_a_cli_run_leaves_no_handler_on_a_closed_stream(tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "Logging error" not in done.stderr and "closed file" not in done.stderr, done.stderr
    assert done.stdout.strip() == "same"
