"""Read-only SQL over the trajectory store: DuckDB views `steps`, `episodes`, `tasks`, `policies`.

Shards are found with the same listing as the learner's catalog; a shard whose footer cannot be
read, or whose schema or version is foreign, is left out with a warning (and not moved: reading
must not change the store). Only SELECT statements run; anything that writes, attaches, copies or
changes settings is refused before DuckDB executes it.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa

from storage.catalog import BadShard, check_footer, list_shards
from storage.schema import STEP_SCHEMA, SchemaError
from storage.store import Store, redact

log = logging.getLogger(__name__)

VIEWS_SQL = (Path(__file__).parent / "sql" / "views.sql").read_text()
VIEW_NAMES = ("steps", "episodes", "tasks", "policies")


class ReadOnlyError(ValueError):
    """A statement given to `distrl sql` would change something; only queries are allowed."""


@dataclass
class SqlSession:
    con: duckdb.DuckDBPyConnection
    shards: list[str]
    skipped: list[BadShard] = field(default_factory=list)

    def query(self, statement: str) -> pa.Table:
        check_read_only(self.con, statement)
        return self.con.sql(statement).to_arrow_table()

    def close(self) -> None:
        self.con.close()


def check_read_only(con: duckdb.DuckDBPyConnection, statement: str) -> None:
    """Raise `ReadOnlyError` unless every statement is a plain query (SELECT/DESCRIBE/SHOW/EXPLAIN SELECT)."""
    try:
        statements = con.extract_statements(statement)
    except duckdb.Error as exc:
        raise ValueError(f"SQL does not parse: {exc}") from None
    if not statements:
        raise ValueError("no SQL statement given")
    for parsed in statements:
        kind = parsed.type
        if kind == duckdb.StatementType.EXPLAIN:
            inner = parsed.query.strip()[len("explain") :].lstrip()
            if inner.lower().startswith("analyze"):
                inner = inner[len("analyze") :]
            check_read_only(con, inner)
            continue
        if kind != duckdb.StatementType.SELECT:
            raise ReadOnlyError(
                f"refused a {kind.name} statement: `distrl sql` is read-only and runs queries only "
                "(SELECT, DESCRIBE, SHOW, EXPLAIN). Export results with --format/--out instead of COPY."
            )


def _valid_shards(store: Store) -> tuple[list[str], list[BadShard]]:
    paths = [s.path for s in list_shards(store)]

    def check(path: str) -> BadShard | None:
        try:
            check_footer(store, path)
        except (SchemaError, pa.ArrowException, OSError, ValueError) as exc:
            return BadShard(path=path, reason=redact(f"{type(exc).__name__}: {exc}"), moved_to=None)
        return None

    with ThreadPoolExecutor(max_workers=8) as pool:
        verdicts = list(pool.map(check, paths))
    bad = [v for v in verdicts if v is not None]
    for shard in bad:
        log.warning("left out unreadable shard %s: %s", store.url(shard.path), shard.reason)
    bad_paths = {b.path for b in bad}
    return [p for p in paths if p not in bad_paths], bad


def open_sql(store: Store, *, threads: int = 2) -> SqlSession:
    """An in-memory DuckDB connection with the store's views; S3 is read through s3fs."""
    con = duckdb.connect(":memory:", config={"threads": threads})
    shards, bad = _valid_shards(store)
    if not store.is_local:
        con.register_filesystem(store.fs)
    if shards:
        source = con.read_parquet([store.url(p) for p in shards], hive_partitioning=False)
    else:
        source = con.from_arrow(STEP_SCHEMA.empty_table())
    source.create_view("steps")
    con.execute(VIEWS_SQL)
    return SqlSession(con=con, shards=shards, skipped=bad)
