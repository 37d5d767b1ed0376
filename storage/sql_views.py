"""Read-only SQL over the trajectory store: DuckDB views `steps`, `episodes`, `tasks`, `policies`,
`shards` (one row per shard file, with the host that wrote it, from its footer's `distrl.host`).

Shards are found with the same listing as the learner's catalog; a shard whose footer cannot be
read, or whose schema or version is foreign, is left out with a warning (and not moved: reading
must not change the store); a shard whose data pages turn out unreadable during a query is named,
left out the same way, and the query rerun; a shard that is a symbolic link is left out too (DuckDB
may read only the store's real folder), as is anything that is not a regular file (never opened: a
FIFO would block) and a file whose name DuckDB would read as a glob pattern. An episode found in
several files (a restored copy) is counted once, as in the replay. Warnings name files escaped. Only queries run, on a connection that can read nothing but
the shards (see `storage.sql_guard`), within limits of time, memory and spill (`storage.sql_limits`).
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa

from storage.catalog import BadShard, check_footer, list_shards, try_read_shard, unreadable_reason
from storage.schema import STEP_SCHEMA, SchemaError, shard_host
from storage.sql_guard import ReadOnlyError, check_read_only, explain_refusal, lock_down
from storage.sql_limits import QueryLimits, SqlLimitError, SqlSettings
from storage.sql_output import escape_control
from storage.sql_sources import RangedShards
from storage.store import Store, redact

log = logging.getLogger(__name__)

VIEWS_SQL = (Path(__file__).parent / "sql" / "views.sql").read_text()
VIEW_NAMES = ("steps", "episodes", "tasks", "policies", "shards")

__all__ = ["ReadOnlyError", "SqlLimitError", "SqlSession", "SqlSettings", "check_read_only", "open_sql"]
_BATCH_ROWS = 65_536


@dataclass
class SqlSession:
    con: duckdb.DuckDBPyConnection
    store: Store
    shards: list[str]
    limits: QueryLimits
    skipped: list[BadShard] = field(default_factory=list)
    hosts: dict[str, str | None] = field(default_factory=dict)  # shard path -> host (its footer's label)
    ranged: RangedShards | None = None  # an S3 store's shards, read by pyarrow (storage.sql_sources)
    warn: bool = True  # log a warning per shard left out (False: the caller reports `skipped` itself)
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
            with self.limits.timed(self.con):
                return self._fetch(statement)
        except duckdb.Error as exc:
            refusal = explain_refusal(exc)
            if refusal is not None:
                raise refusal from None
            raise

    def _fetch(self, statement: str) -> pa.Table:
        """The result, batch by batch: a result larger than the memory limit stops the query (the
        Arrow copy lives outside DuckDB's own accounting: a 300 MB result passed a 20 MB limit)."""
        reader = self.con.sql(statement).to_arrow_reader(_BATCH_ROWS)
        batches, size = [], 0
        try:
            for batch in reader:
                size += batch.nbytes
                if size > self.limits.settings.memory_limit:
                    raise self.limits.result_too_large(size)
                batches.append(batch)
        except MemoryError:
            raise  # past the process's cap while a query runs: `QueryLimits.timed` names the limit
        except (pa.ArrowException, OSError) as exc:
            raise _as_duckdb_error(exc) from None
        return pa.Table.from_batches(batches, reader.schema)

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
        _warn(self.store, bad, self.warn)
        gone = {b.path for b in bad}
        self.shards = [p for p in self.shards if p not in gone]
        self.skipped.extend(bad)
        _create_views(self.con, self.store, self.shards, self.hosts, self.ranged)

    def close(self) -> None:
        self.con.close()
        self.limits.close()


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


# DuckDB's errors while streaming reach Python through Arrow's C stream as a plain OSError that
# keeps only the message ("Out of Memory Error: ..."): its prefix gives the type back.
_ERROR_TYPES = {
    "Out of Memory Error": duckdb.OutOfMemoryException,
    "INTERRUPT Error": duckdb.InterruptException,
    "Conversion Error": duckdb.ConversionException,
    "Out of Range Error": duckdb.OutOfRangeException,
    "Permission Error": duckdb.PermissionException,
    "Invalid Input Error": duckdb.InvalidInputException,
    "IO Error": duckdb.IOException,
}


def _as_duckdb_error(exc: Exception) -> duckdb.Error:
    message = str(exc)
    kind = next((t for prefix, t in _ERROR_TYPES.items() if message.startswith(prefix)), duckdb.Error)
    return kind(message)


def _warn(store: Store, bad: list[BadShard], warn: bool) -> None:
    for shard in bad:
        log.log(
            logging.WARNING if warn else logging.DEBUG,
            "left out unreadable shard %s",
            escape_control(f"{store.url(shard.path)}: {shard.reason}"),
        )


def _valid_shards(
    store: Store, warn: bool, ranged: RangedShards | None
) -> tuple[list[str], list[BadShard], dict[str, str | None]]:
    """Shards whose footer is readable and ours, those left out, and each good one's host label.
    With `ranged` (an S3 store), each footer is fetched and parsed there, once for the session."""
    sizes = {s.path: s.size for s in list_shards(store)}
    paths = list(sizes)
    hosts: dict[str, str | None] = {}

    def check(path: str) -> BadShard | None:
        try:
            verdict = check_one(path)
            if verdict is None and ranged is not None:
                ranged.add(path, store.url(path))
        except (pa.ArrowException, OSError, ValueError) as exc:
            verdict = BadShard(path=path, reason=redact(f"{type(exc).__name__}: {exc}"), moved_to=None)
        if verdict is not None and ranged is not None:
            ranged.forget(path)
        return verdict

    def check_one(path: str) -> BadShard | None:
        unreadable = unreadable_reason(store, path)  # decided before anything opens it
        if unreadable is not None:
            return BadShard(path=path, reason=unreadable, moved_to=None)
        if store.is_local and os.path.realpath(path) != path:  # the root is resolved: a link inside
            # DuckDB may read only the real folder, so the linked file fails every query: leave it out.
            reason = f"a symbolic link (to {os.path.realpath(path)}); only files inside the store are read"
            return BadShard(path=path, reason=reason, moved_to=None)
        try:
            opened = ranged.footer(path, sizes[path]) if ranged is not None else None
            hosts[path] = shard_host(check_footer(store, path, opened).metadata)
        except (SchemaError, pa.ArrowException, OSError, ValueError) as exc:
            return BadShard(path=path, reason=redact(f"{type(exc).__name__}: {exc}"), moved_to=None)
        return None

    with ThreadPoolExecutor(max_workers=8) as pool:
        verdicts = list(pool.map(check, paths))
    bad = [v for v in verdicts if v is not None]
    _warn(store, bad, warn)
    bad_paths = {b.path for b in bad}
    return [p for p in paths if p not in bad_paths], bad, hosts


def _create_views(
    con: duckdb.DuckDBPyConnection,
    store: Store,
    shards: list[str],
    hosts: dict[str, str | None],
    ranged: RangedShards | None,
) -> None:
    # `shard_rows` carries each row's file name, for the `shards` view and to count a copied
    # episode once; `steps` (views.sql) is it without that column: the schema's columns, plus
    # `family` (the name every other view uses).
    # Every path is a plain file name: `unreadable_reason` left out those DuckDB reads as a glob.
    if ranged is not None:  # S3: pyarrow reads the byte ranges of the columns a query names
        con.register("shard_rows", ranged.dataset(shards))  # the connection keeps the dataset alive
    else:
        if shards:
            urls = [store.url(p) for p in shards]
            # by name: shards of schema 1.0 lack `observation` (storage.schema.ADDED_COLUMNS)
            source = con.read_parquet(urls, hive_partitioning=False, filename=True, union_by_name=True)
            if "observation" not in source.columns:  # the `steps` view fills it per row
                source = source.project("*, NULL::VARCHAR AS observation")
        else:
            empty = STEP_SCHEMA.empty_table()
            source = con.from_arrow(empty.append_column("filename", pa.array([], pa.string())))
        source.create_view("shard_rows")
    labels = pa.table(
        {
            "shard": pa.array([store.url(p) for p in shards], pa.string()),
            "host": pa.array([hosts.get(p) for p in shards], pa.string()),
        }
    )
    con.register("shard_labels", labels)  # the connection keeps the table alive
    con.execute(VIEWS_SQL)


def open_sql(
    store: Store, *, threads: int = 2, settings: SqlSettings | None = None, warn: bool = True
) -> SqlSession:
    """An in-memory DuckDB connection with the store's views, locked down to reading the shards, and
    limited in time, memory and spill space (`settings`, default: the `DISTRL_SQL_*` variables).
    With `warn` False the shards left out are logged at debug level only (`distrl sql` prints them).

    S3 shards are read by pyarrow over byte ranges (`storage.sql_sources`): a query downloads the
    columns it names, not the screenshots; no DuckDB extension is involved.
    """
    limits = QueryLimits(settings or SqlSettings())
    con = duckdb.connect(":memory:", config={"threads": threads})
    try:
        limits.apply(con)
        # S3 column chunks downloaded are kept for the session's later queries, within a quarter
        # of the memory limit (the cache lives outside DuckDB's accounting, inside the process cap)
        cache_bytes = int(limits.settings.memory_limit) // 4
        ranged = None if store.is_local else RangedShards(store.ranged_fs, cache_bytes)
        shards, bad, hosts = _valid_shards(store, warn, ranged)
        if not store.is_local:
            # The views read S3 through pyarrow (`storage.sql_sources`); DuckDB itself reads an S3
            # file only to name a bad shard (`SqlSession._probe`) or for a query's own read_parquet.
            con.register_filesystem(store.fs)
        _create_views(con, store, shards, hosts, ranged)
        lock_down(con, store.url(store.trajectories))
    except BaseException:
        con.close()
        limits.close()
        raise
    return SqlSession(
        con=con, store=store, shards=shards, limits=limits, skipped=bad, hosts=hosts, warn=warn, ranged=ranged
    )
