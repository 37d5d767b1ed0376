"""`bench.sql_s3_reads`'s `duckdb_httpfs` read path, run by another Python: one with DuckDB's 1.4
long-term-support line and the `duckdb-ext-httpfs` package (the project pins DuckDB 2.0.1, for
which no httpfs package exists), so this file imports nothing of the project.

It reads one JSON object from its first argument (endpoint, shard URLs, the views' SQL, queries) and
then, for each query, in step with the bench over stdin/stdout (so that the bench can set the
counting server's phase in between): opens a fresh connection whose views read the shards through
httpfs, runs the query twice, and prints the seconds of each step.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import duckdb
import duckdb_ext  # type: ignore[import-not-found]  # ships the httpfs binary for DuckDB 1.4.4

# moto accepts any key; the secret only makes httpfs sign requests for the local endpoint
SECRET_SQL = """CREATE SECRET bench (TYPE s3, KEY_ID 'bench', SECRET 'bench', REGION 'us-east-1',
    ENDPOINT $endpoint, URL_STYLE 'path', USE_SSL false)"""
LABELS_SQL = "CREATE TABLE shard_labels (shard VARCHAR, host VARCHAR)"


def _step(word: str) -> None:
    """Say what comes next and wait for the bench's go (it sets the counter's phase first)."""
    print(word, flush=True)
    sys.stdin.readline()


def _open(spec: dict) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:", config={"threads": 2})
    extensions = Path(next(iter(duckdb_ext.__path__))) / "extensions"  # a namespace package
    con.execute(f"SET extension_directory = '{extensions}'")
    con.execute("LOAD httpfs")
    con.execute(SECRET_SQL, {"endpoint": spec["endpoint"].removeprefix("http://")})
    con.read_parquet(spec["urls"], hive_partitioning=False, filename=True).create_view("shard_rows")
    con.execute(LABELS_SQL)
    con.execute(spec["views_sql"])
    return con


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    for statement in spec["queries"]:
        _step("open")
        started = time.perf_counter()
        con = _open(spec)
        print(f"seconds {time.perf_counter() - started}", flush=True)
        for run in ("first", "repeated"):
            _step(run)
            started = time.perf_counter()
            con.sql(statement).fetchall()
            print(f"seconds {time.perf_counter() - started}", flush=True)
        con.close()


if __name__ == "__main__":
    main()
