"""`distrl sql` against resource exhaustion, hostile data and bad stores: every limit ends the query with one line naming its setting; data never drives the terminal;
a symlinked shard, a readable `./.tmp/` folder, a missing store or an unreachable endpoint are each
one named line, never a traceback or an answer from nothing."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from ops.cli import main as cli
from storage.sql_views import SqlLimitError, SqlSettings, open_sql
from storage.store import Store
from tests.reliability.conftest import fill

ENDLESS = "SELECT count(*) FROM range(10000000000000)"  # ~hours of counting
BIG_AGG = "SELECT length(string_agg(repeat('x', 1000), ',')) FROM range(100000)"  # ~100 MB state
BIG_RESULT = "SELECT repeat('x', 1000) AS x FROM range(30000)"  # ~30 MB of rows
TINY = {"memory_limit": "20MB", "timeout_s": 0.5}


def _one_error_line(err: str, *names: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in err, err
    assert all(name in lines[0] for name in names), err


def test_each_limit_stops_its_query_and_the_session_goes_on(local_store: Store) -> None:
    fill(local_store, 3)
    session = open_sql(local_store, settings=SqlSettings(**TINY))
    with pytest.raises(SqlLimitError, match="DISTRL_SQL_TIMEOUT_S"):
        session.query(ENDLESS)
    with pytest.raises(SqlLimitError, match="DISTRL_SQL_MEMORY_LIMIT"):
        session.query(BIG_AGG)
    with pytest.raises(SqlLimitError, match="DISTRL_SQL_MEMORY_LIMIT"):
        session.query(BIG_RESULT)  # the Arrow copy of the result is outside DuckDB's own accounting
    assert session.query("SELECT count(*) FROM episodes").column(0)[0].as_py() == 3
    session.close()


def test_spilling_is_capped_in_a_private_folder(local_store: Store, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    session = open_sql(local_store, settings=SqlSettings(memory_limit="30MB", max_spill="1MB"))
    spill = Path(session.limits.spill_dir)
    assert stat.S_IMODE(spill.stat().st_mode) == 0o700 and tmp_path not in spill.parents
    with pytest.raises(SqlLimitError, match="DISTRL_SQL_MAX_SPILL"):
        session.query(
            "SELECT sum(length(v)) FROM (SELECT md5(i::VARCHAR) || md5((i + 1)::VARCHAR) AS v "
            "FROM range(3000000) t(i) ORDER BY v)"
        )
    session.close()
    assert not spill.exists()


def test_the_cli_names_the_setting(local_store: Store, monkeypatch, capsys) -> None:
    fill(local_store, 3)
    monkeypatch.setenv("DISTRL_SQL_TIMEOUT_S", "0.5")
    assert cli(["sql", ENDLESS, "--store", local_store.uri]) == 1
    _one_error_line(capsys.readouterr().err, "DISTRL_SQL_TIMEOUT_S")
    monkeypatch.setenv("DISTRL_SQL_MEMORY_LIMIT", "20MB")
    assert cli(["sql", BIG_AGG, "--store", local_store.uri]) == 1
    _one_error_line(capsys.readouterr().err, "DISTRL_SQL_MEMORY_LIMIT")
    monkeypatch.setenv("DISTRL_SQL_MEMORY_LIMIT", "lots")
    assert cli(["sql", "SELECT 1", "--store", local_store.uri]) == 2
    _one_error_line(capsys.readouterr().err, "DISTRL_SQL_MEMORY_LIMIT")


HOSTILE = "SELECT chr(27) || ']0;pwned' || chr(7) AS title, chr(27) || '[2J' || chr(8238) AS \"x\u001b[31m\""


def test_control_characters_are_shown_escaped_in_tables_only(local_store: Store, capsys, tmp_path) -> None:
    fill(local_store, 3)
    assert cli(["sql", HOSTILE, "--store", local_store.uri]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in "\x1b\x07\u202e"), repr(out)
    assert "\\x1b]0;pwned\\x07" in out and "\\x1b[2J\\u202e" in out and "x\\x1b[31m" in out
    # CSV and JSON are the data: CSV keeps the bytes, JSON escapes them by its own rules.
    assert cli(["sql", HOSTILE, "--store", local_store.uri, "--format", "csv"]) == 0
    assert "\x1b]0;pwned\x07" in capsys.readouterr().out
    assert cli(["sql", HOSTILE, "--store", local_store.uri, "--format", "json"]) == 0
    assert "\\u001b]0;pwned\\u0007" in capsys.readouterr().out
    # An error message that quotes the data.
    assert cli(["sql", "SELECT CAST(chr(27) || '[2J' AS INTEGER)", "--store", local_store.uri]) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\\x1b[2J" in err


def test_a_symlinked_shard_is_named_and_left_out(local_store: Store, tmp_path, capsys) -> None:
    fill(local_store, 6)
    shard = next(Path(local_store.trajectories).rglob("*.parquet"))
    outside = tmp_path / "elsewhere.parquet"
    outside.write_bytes(shard.read_bytes())
    link = shard.with_name("c9-000000-linked.parquet")
    link.symlink_to(outside)
    session = open_sql(local_store)
    assert session.query("SELECT count(*) FROM episodes").column(0)[0].as_py() == 6
    assert [b.path for b in session.skipped] == [str(link)]
    session.close()
    assert cli(["sql", "SELECT count(*) FROM episodes", "--store", local_store.uri, "--format", "csv"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[-1] == "6" and f"warning: left out unreadable shard {link}" in err


def test_a_dot_tmp_folder_in_the_working_folder_is_not_readable(
    local_store: Store, tmp_path, monkeypatch
) -> None:
    """DuckDB's default spill folder is `./.tmp`, and DuckDB lets a query read its spill folder."""
    fill(local_store, 3)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".tmp").mkdir()
    (tmp_path / ".tmp" / "planted.csv").write_text("secret\nsk-planted-canary\n")
    session = open_sql(local_store)
    for query in (
        "SELECT * FROM read_csv('.tmp/planted.csv')",
        f"SELECT * FROM read_text('{tmp_path}/.tmp/planted.csv')",
    ):
        with pytest.raises(Exception, match="refused"):
            session.query(query)
    session.close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_store_that_is_not_there(kind: str, tmp_path, capsys, monkeypatch) -> None:
    target = tmp_path / "store"
    if kind == "file":
        target.write_text("not a store")
    assert cli(["sql", "SELECT count(*) FROM episodes", "--store", str(target)]) == 2
    _one_error_line(capsys.readouterr().err, "--store", str(target))
    monkeypatch.setenv("DISTRL_STORE_URI", str(target))
    assert cli(["sql", "SELECT count(*) FROM episodes"]) == 2
    _one_error_line(capsys.readouterr().err, "DISTRL_STORE_URI")


def test_an_unreachable_s3_endpoint_and_a_missing_bucket(aws_env, capsys, monkeypatch) -> None:
    assert cli(["sql", "SELECT 1", "--store", "s3://no-such-bucket-x/p"]) == 2
    _one_error_line(capsys.readouterr().err, "--store", "no bucket")
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{_closed_port()}")
    assert cli(["sql", "SELECT 1", "--store", "s3://bucket/p"]) == 2
    _one_error_line(capsys.readouterr().err, "--store", "DISTRL_S3_ENDPOINT_URL")


def test_a_query_that_is_not_utf8(local_store: Store, capsys) -> None:
    fill(local_store, 3)
    query = os.fsdecode(b"SELECT '\xff' AS x")  # what Python makes of such a command-line argument
    assert cli(["sql", query, "--store", local_store.uri]) == 1
    _one_error_line(capsys.readouterr().err, "UTF-8")
