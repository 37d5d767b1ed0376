"""One large value cannot escape `distrl sql`'s memory limit: DuckDB's limit governs its buffer
manager, and `SELECT length(repeat('x', 1500000000))` succeeded at 3.1 GB under a 200 MB limit.
While a query runs the process's data size is capped too (`storage.sql_limits.data_size_capped`)."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from storage.sql_limits import PROCESS_HEADROOM, data_size_capped
from storage.sql_views import SqlLimitError, SqlSettings, open_sql
from storage.store import Store
from tests.reliability.conftest import fill

ROOT = Path(__file__).resolve().parents[2]
# Far past 2 x 20 MB + the headroom, far below what a test machine has.
LARGE_VALUE = f"SELECT length(repeat('x', {PROCESS_HEADROOM + 400 * 1024**2})) AS n"


def test_a_value_larger_than_the_limit_stops_its_query_and_the_session_goes_on(local_store: Store) -> None:
    fill(local_store, 3)
    before = resource.getrlimit(resource.RLIMIT_DATA)
    session = open_sql(local_store, settings=SqlSettings(memory_limit="20MB"))
    try:
        with pytest.raises(SqlLimitError, match="DISTRL_SQL_MEMORY_LIMIT"):
            session.query(LARGE_VALUE)
        assert resource.getrlimit(resource.RLIMIT_DATA) == before  # the cap ends with the query
        assert session.query("SELECT length(repeat('x', 1000000)) AS n").column("n").to_pylist() == [10**6]
        assert session.query("SELECT count(*) AS n FROM steps").column("n").to_pylist()[0] > 0
    finally:
        session.close()


def test_the_cap_is_lifted_after_a_failure_inside() -> None:
    before = resource.getrlimit(resource.RLIMIT_DATA)
    with pytest.raises(MemoryError), data_size_capped(64 * 1024**2):
        assert resource.getrlimit(resource.RLIMIT_DATA) != before
        bytearray(512 * 1024**2)
    assert resource.getrlimit(resource.RLIMIT_DATA) == before


@pytest.mark.slow
def test_the_cli_answers_one_line_naming_the_limit(local_store: Store) -> None:
    fill(local_store, 3)
    done = subprocess.run(
        [sys.executable, "-m", "ops.cli", "sql", "--store", local_store.uri, LARGE_VALUE],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "DISTRL_SQL_MEMORY_LIMIT": "20MB", "PATH": "/usr/bin:/bin"},
        timeout=600,
        check=False,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1 and "DISTRL_SQL_MEMORY_LIMIT" in lines[0], done.stderr
    assert done.stdout == ""
