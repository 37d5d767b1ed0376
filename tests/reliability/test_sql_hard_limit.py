"""`distrl sql` ends a query at DISTRL_SQL_TIMEOUT_S whatever DuckDB is doing: one long function
call (`lpad` to 1.2e9 characters) never reaches DuckDB's interrupt, so the child process running it
is killed (`ops.sql_child`); the person reads one line naming the limit, and nothing is left behind."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

import pytest

from ops.cli import main as cli
from ops.sql_child import SqlJob, run_sql_child
from storage.sql_limits import SqlSettings
from storage.store import Store
from tests.reliability.conftest import fill

# Ran 455 s past a 20 s limit when only DuckDB's interrupt stopped queries.
LPAD = "SELECT length(lpad('x', 1200000000, 'y')) AS n"


def _snapshot(root: str) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(Path(root).rglob("*"))}


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary folder of this process and of the child, to see what either leaves there."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_a_query_deaf_to_the_interrupt_is_killed_at_the_limit(local_store: Store, private_tmp: Path) -> None:
    fill(local_store, 3)
    before = _snapshot(local_store.root)
    err = io.StringIO()
    job = SqlJob(LPAD, local_store.uri, "csv", None, 50)
    outcome = run_sql_child(job, SqlSettings(timeout_s=0.5), stdout=io.StringIO(), stderr=err)
    assert outcome.killed and outcome.code == 1
    assert outcome.stderr == (
        "error: query stopped after 0.5 s (DISTRL_SQL_TIMEOUT_S); narrow it (WHERE, LIMIT) or raise the limit"
    )
    assert err.getvalue() == outcome.stderr + "\n"
    assert _snapshot(local_store.root) == before  # nothing in the store changed
    assert list(private_tmp.iterdir()) == []  # the child's spill folder went with its private folder


def test_the_cli_prints_one_line_naming_the_limit(
    local_store: Store, private_tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(local_store, 3)
    monkeypatch.setenv("DISTRL_SQL_TIMEOUT_S", "0.5")
    assert cli(["sql", LPAD, "--store", local_store.uri]) == 1
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1 and "Traceback" not in err, err
    assert "DISTRL_SQL_TIMEOUT_S" in lines[0] and "raise the limit" in lines[0]


def test_a_query_within_the_limit_answers_through_the_child(local_store: Store, private_tmp: Path) -> None:
    fill(local_store, 3)
    out, err = io.StringIO(), io.StringIO()
    job = SqlJob("SELECT count(*) AS n FROM episodes", local_store.uri, "csv", None, 50)
    outcome = run_sql_child(job, SqlSettings(), stdout=out, stderr=err)
    assert (outcome.code, outcome.killed, err.getvalue()) == (0, False, "")
    assert out.getvalue().splitlines() == ['"n"', "3"]  # pyarrow's CSV quotes names
    assert list(private_tmp.iterdir()) == []
