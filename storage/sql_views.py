"""Read-only SQL over the trajectory store: DuckDB views `steps`, `episodes`, `tasks`, `policies`.

Shards are found with the same listing as the learner's catalog; a shard whose footer cannot be
read, or whose schema or version is foreign, is left out with a warning (and not moved: reading
must not change the store); a shard whose data pages turn out unreadable during a query is named,
left out the same way, and the query rerun. Only queries run, on a connection that can read
nothing but the shards (see `storage.sql_guard`).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa

from storage.catalog import BadShard, check_footer, list_shards, try_read_shard
from storage.schema import STEP_SCHEMA, SchemaError
from storage.sql_guard import ReadOnlyError, check_read_only, explain_refusal, lock_down
from storage.store import Store, redact

log = logging.getLogger(__name__)

VIEWS_SQL = (Path(__file__).parent / "sql" / "views.sql").read_text()
VIEW_NAMES = ("steps", "episodes", "tasks", "policies")

__all__ = ["ReadOnlyError", "SqlSession", "check_read_only", "open_sql"]


@dataclass
class SqlSession:
    con: duckdb.DuckDBPyConnection
    store: Store
    shards: list[str]
    skipped: list[BadShard] = field(default_factory=list)
    _probed: bool = False

    def query(self, statement: str) -> pa.Table:
        """Run a read-only query; a shard that turns out unreadable is named, left out, and the query rerun."""
        check_read_only(self.con, statement)
        try:
            return self._run(statement)
        except duckdb.Error as exc:
            if isinstance(exc, _QUERY_ERRORS) or self._probed:
                raise
            # The footers were fine, so a data page is bad somewhere (DuckDB's error names no file):
            # read every shard once, as the learner does, and leave the bad ones out.
            bad = self._probe()
            if not bad:
                raise
            self._exclude(bad)
            return self._run(statement)

    def _run(self, statement: str) -> pa.Table:
        try:
            return self.con.sql(statement).to_arrow_table()
        except duckdb.Error as exc:
            refusal = explain_refusal(exc)
            if refusal is not None:
                raise refusal from None
            raise

    def _probe(self) -> list[BadShard]:
        self._probed = True
        with ThreadPoolExecutor(max_workers=8) as pool:
            verdicts = list(pool.map(lambda p: try_read_shard(self.store, p, mode="record")[1], self.shards))
        bad = [v for v in verdicts if v is not None]
        known_bad = {b.path for b in bad}
        for path in self.shards:  # what pyarrow reads, DuckDB may still refuse: ask DuckDB too
            if path in known_bad:
                continue
            try:
                self.con.read_parquet(self.store.url(path)).to_arrow_table()
            except duckdb.Error as exc:
                bad.append(BadShard(path=path, reason=redact(f"DuckDB: {exc}"), moved_to=None))
        return bad

    def _exclude(self, bad: list[BadShard]) -> None:
        for shard in bad:
            log.warning("left out unreadable shard %s: %s", self.store.url(shard.path), shard.reason)
        gone = {b.path for b in bad}
        self.shards = [p for p in self.shards if p not in gone]
        self.skipped.extend(bad)
        _create_views(self.con, self.store, self.shards)

    def close(self) -> None:
        self.con.close()


# Errors in the query itself (names, types, syntax, the sandbox): reading shards again cannot help.
_QUERY_ERRORS = (
    duckdb.ParserException,
    duckdb.BinderException,
    duckdb.CatalogException,
    duckdb.PermissionException,
    duckdb.ConversionException,
    duckdb.OutOfRangeException,
    duckdb.OutOfMemoryException,
    duckdb.InterruptException,
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


def _create_views(con: duckdb.DuckDBPyConnection, store: Store, shards: list[str]) -> None:
    if shards:
        source = con.read_parquet([store.url(p) for p in shards], hive_partitioning=False)
    else:
        source = con.from_arrow(STEP_SCHEMA.empty_table())
    source.create_view("steps")
    con.execute(VIEWS_SQL)


def open_sql(store: Store, *, threads: int = 2) -> SqlSession:
    """An in-memory DuckDB connection with the store's views, locked down to reading the shards.

    S3 is read through s3fs (a registered fsspec filesystem), so no DuckDB extension is involved.
    """
    con = duckdb.connect(":memory:", config={"threads": threads})
    shards, bad = _valid_shards(store)
    if not store.is_local:
        con.register_filesystem(store.fs)
    _create_views(con, store, shards)
    lock_down(con, store.url(store.trajectories))
    return SqlSession(con=con, store=store, shards=shards, skipped=bad)
