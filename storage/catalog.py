"""Shard discovery and safe reading: find shards not seen before, read them, set bad ones aside.

The catalog is the set of shard paths already handled. Each `scan()` lists the store and returns
only new shards. The first scan of a catalog lists the whole `trajectories/` tree; later scans list
only the `date=` partitions from (the newest partition seen, capped at today UTC) minus
`slack_days` on, so a scan's cost follows the recent days' shards, not the store's whole history
(see `list_shards`). A shard that cannot be read, whose schema or version is foreign, or whose
values break a bound of `storage.schema` (ranges, episode structure, sizes) is moved to
`<store>/quarantine/` (mode "move", the learner, one warning line naming the file and the rule) or
only recorded (mode "record", read-only readers such as `distrl sql`, which say so themselves), and
never raised: one bad file must not stop ingestion. What is not a regular file (a FIFO, a device, a
link to one) is never opened, and a name that DuckDB would read as a glob pattern (`*`, `?`, `[`)
never read: both are left in place, with a warning. File names are printed escaped.
"""

from __future__ import annotations

import io
import logging
import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import BinaryIO, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from storage.schema import (
    COLUMN_NAMES,
    IMAGE_COLUMN,
    MAX_SHARD_BYTES,
    MAX_SHARD_ROWS,
    STEP_SCHEMA,
    VARIABLE_WIDTH_COLUMNS,
    SchemaError,
    check_schema_version,
    decode_dictionaries,
    upgrade,
    validate_ranges,
    validate_schema,
    validate_sizes,
    validate_table,
)
from storage.sql_output import escape_control
from storage.store import QUARANTINE_DIR, TRAJECTORIES_DIR, Store, redact, store_errors

log = logging.getLogger(__name__)

QuarantineMode = Literal["move", "record"]
VersionBound = Callable[[int], int | None]
"""Given a shard's largest policy version, the newest version that exists (None: not known)."""
GLOB_CHARACTERS = frozenset("*?[")
"""Characters DuckDB's `read_parquet` reads as a pattern even inside a list of files: a shard
named `*.parquet` made `distrl sql` read every shard of its folder twice."""


class VersionLookupError(OSError):
    """The registry's newest version could not be read; the shard is tried again at the next scan."""


@dataclass(frozen=True)
class ShardInfo:
    path: str
    size: int
    mtime: float


@dataclass(frozen=True)
class BadShard:
    path: str
    reason: str
    moved_to: str | None
    transient: bool = False  # listed but not found when opened: look again at the next scan


_DATE_PARTITION = re.compile(r"(?:^|/)date=(\d{4}-\d{2}-\d{2})(?:/|$)")


def list_shards(store: Store, since: date | None = None) -> list[ShardInfo]:
    """Complete shards under `trajectories/`, oldest first (temp files are hidden and skipped).

    With `since`, folders `date=D` with D before `since` are not listed at all (nor anything under
    them): the walk lists `trajectories/`, each `pool=` folder (one LIST page holds ~3 years of date
    folders) and the date folders from `since` on. Anything not in a `date=` folder is always listed.
    """
    root = store.trajectories
    # s3fs caches listings: without this a learner that listed a date folder once never sees the
    # shards written into it later (measured: stuck at 238 of 18,000 steps in a `distrl up` run).
    store.fs.invalidate_cache()  # the whole cache: a path argument drops only that level, not its folders
    if not store.fs.exists(root):
        return []
    found = store.fs.find(root, detail=True) if since is None else _walk_since(store, root, since)
    shards = []
    for path, info in found.items():
        name = path.rsplit("/", 1)[-1]
        if not name.endswith(".parquet") or name.startswith("."):
            continue
        shards.append(ShardInfo(path=path, size=int(info.get("size") or 0), mtime=_mtime(info)))
    shards.sort(key=lambda s: (s.mtime, s.path))
    return shards


def _walk_since(store: Store, folder: str, since: date) -> dict[str, dict]:
    found: dict[str, dict] = {}
    for info in store.fs.ls(folder, detail=True):
        path = info["name"].rstrip("/")
        if path == folder.rstrip("/"):
            continue
        if info.get("type") != "directory":
            found[path] = info
            continue
        day = partition_day(path.rsplit("/", 1)[-1])
        if day is not None and day < since:
            continue  # a partition older than the bound: not listed
        found.update(_walk_since(store, path, since) if day is None else store.fs.find(path, detail=True))
    return found


def partition_day(path: str) -> date | None:
    """The `date=` partition of a shard path, or None when it has none (or an invalid date)."""
    found = _DATE_PARTITION.search(path)
    if found is None:
        return None
    try:
        return date.fromisoformat(found.group(1))
    except ValueError:
        return None


def newest_partition(paths: Iterable[str]) -> date | None:
    """The newest `date=` partition among shard paths (None when none has one)."""
    return max((d for d in (partition_day(p) for p in paths) if d is not None), default=None)


def _mtime(info: dict) -> float:
    value = info.get("mtime") or info.get("LastModified") or info.get("created") or 0.0
    return value.timestamp() if hasattr(value, "timestamp") else float(value)


class NotRegularFile(OSError):
    """A path that is not a regular file: opening a FIFO blocks, a device may have side effects."""


def unreadable_reason(store: Store, path: str) -> str | None:
    """Why a listed shard must not be opened or handed to DuckDB at all, or None: its name is a
    glob pattern to DuckDB, or (local stores) it is not a regular file. Decided without opening it."""
    name = path.rsplit("/", 1)[-1]
    if GLOB_CHARACTERS & set(name):
        return "its name has '*', '?' or '[', which DuckDB reads as a glob pattern; rename it to read it"
    if store.is_local:
        try:
            mode = os.stat(path).st_mode  # follows a link: a link to a FIFO is a FIFO
        except FileNotFoundError:
            return None  # gone: the open reports it as vanished
        except OSError as exc:
            return f"cannot stat it: {exc.strerror}"
        if not stat.S_ISREG(mode):
            return "not a regular file (a FIFO, a device or a link to one): never opened"
    return None


def _open(store: Store, path: str, *, ranged: bool = False):
    """Open a shard for reading; a local path is opened non-blocking and checked to be a regular
    file before anything reads it (it may have been swapped for a FIFO since it was listed).
    `ranged`: on S3, fetch only the byte ranges read (some columns), not the whole file at once."""
    if not store.is_local:
        return (store.ranged_fs if ranged else store.fs).open(path, "rb")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotRegularFile(f"{path}: not a regular file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def check_footer_sizes(
    metadata: pq.FileMetaData,
    source: str,
    *,
    max_rows: int = MAX_SHARD_ROWS,
    max_bytes: int = MAX_SHARD_BYTES,
) -> None:
    """Refuse by the footer alone what would not fit: more than `MAX_SHARD_ROWS` rows, or pages that
    decompress to more than `MAX_SHARD_BYTES`, before a single page is read."""
    if metadata.num_rows > max_rows:
        raise SchemaError(f"{source}: {metadata.num_rows} rows; at most {max_rows} (MAX_SHARD_ROWS)")
    pages = sum(
        metadata.row_group(g).column(c).total_uncompressed_size
        for g in range(metadata.num_row_groups)
        for c in range(metadata.num_columns)
    )
    if pages > max_bytes:
        raise SchemaError(
            f"{source}: pages of {pages} bytes uncompressed; at most {max_bytes} (MAX_SHARD_BYTES)"
        )


def read_shard(
    store: Store,
    path: str,
    columns: Iterable[str] | None = None,
    *,
    version_bound: VersionBound | None = None,
    without_images: bool = False,
) -> pa.Table:
    """Read and validate one shard: schema, sizes (measured before strings are decoded), value
    ranges and episode structure (`storage.schema`); raises `SchemaError` or `OSError`/`ArrowInvalid`
    if it is unusable. `version_bound` adds the registry's newest version as a bound.
    `without_images`: `screenshot_png` is never read (its pages are most of a shard's bytes when
    collectors store screenshots) and comes back null; everything else is validated as usual."""
    source = store.url(path)
    with _open(store, path, ranged=without_images) as fh:
        # Strings stay dictionary-encoded until measured: 100k rows repeating one 20 KB value are
        # 100k indices and one value, not 2 GB.
        footer = pq.ParquetFile(fh)
        check_schema_version(footer.schema_arrow.metadata, source=source)
        check_footer_sizes(footer.metadata, source)
        strings = [name for name in VARIABLE_WIDTH_COLUMNS if name in footer.schema_arrow.names]
        # pre_buffer: the columns read come in a few coalesced ranges, not one request per column.
        parquet = pq.ParquetFile(fh, metadata=footer.metadata, read_dictionary=strings, pre_buffer=True)
        if without_images and columns is None:
            validate_schema(footer.schema_arrow, source=source)  # the one column not read is checked too
            present = footer.schema_arrow.names  # a shard of an older 1.x lacks the columns added since
            table = _with_null_images(
                parquet.read(columns=[n for n in COLUMN_NAMES if n != IMAGE_COLUMN and n in present])
            )
        else:
            table = parquet.read(columns=list(columns) if columns is not None else None)
    validate_sizes(table, source=source)
    table = decode_dictionaries(table)
    if columns is None:
        table = upgrade(table)  # a shard of an older 1.x: the columns added since at their defaults
    if columns is None:
        validate_table(table, source=source)
        validate_ranges(table, source=source, version_bound=version_bound)
    return table


def _with_null_images(table: pa.Table) -> pa.Table:
    """`table` with a null `screenshot_png` in the schema's place."""
    nulls = pa.nulls(table.num_rows, STEP_SCHEMA.field(IMAGE_COLUMN).type)
    return table.add_column(COLUMN_NAMES.index(IMAGE_COLUMN), IMAGE_COLUMN, nulls)


def check_footer(store: Store, path: str, opened: BinaryIO | io.RawIOBase | None = None) -> pa.Schema:
    """Cheap validity check (footer only): readable, known schema version, step schema, row count
    and uncompressed size within bounds. Returns the shard's schema, whose metadata holds its labels
    (`storage.schema.shard_host`). `opened`: the shard already opened by the caller (its own reads)."""
    with opened or _open(store, path) as fh:
        parquet = pq.ParquetFile(fh)
        schema, metadata = parquet.schema_arrow, parquet.metadata
    check_schema_version(schema.metadata, source=store.url(path))
    validate_schema(schema, source=store.url(path))
    check_footer_sizes(metadata, store.url(path))
    return schema


def quarantine(store: Store, path: str, reason: str, mode: QuarantineMode) -> BadShard:
    """Set a bad shard aside (mode "move": one warning line naming the file and the rule) or only
    record it (mode "record": a debug line; the reader reports it its own way)."""
    moved_to = None
    if mode == "move":
        relative = path[len(store.trajectories) :].lstrip("/")
        target = store.path(QUARANTINE_DIR, relative)
        try:
            store.fs.mv(path, target)
            moved_to = target
        except store_errors() as exc:
            reason = f"{reason}; could not move it aside: {redact(str(exc))}"
    log.log(
        logging.WARNING if mode == "move" else logging.DEBUG,
        "quarantined shard %s: %s%s",
        escape_control(store.url(path)),
        escape_control(reason),
        f" (moved to {escape_control(store.url(moved_to))})" if moved_to else "",
    )
    return BadShard(path=path, reason=reason, moved_to=moved_to)


def skip(store: Store, path: str, reason: str, mode: QuarantineMode) -> BadShard:
    """A shard left where it is, never read (see `unreadable_reason`); one line, like `quarantine`."""
    log.log(
        logging.WARNING if mode == "move" else logging.DEBUG,
        "skipped shard %s: %s (left in place)",
        escape_control(store.url(path)),
        escape_control(reason),
    )
    return BadShard(path=path, reason=reason, moved_to=None)


def try_read_shard(
    store: Store,
    path: str,
    mode: QuarantineMode,
    columns: Iterable[str] | None = None,
    *,
    version_bound: VersionBound | None = None,
    without_images: bool = False,
) -> tuple[pa.Table | None, BadShard | None]:
    """Read a shard, or quarantine (or skip) it and return why; never raises for a bad file."""
    unreadable = unreadable_reason(store, path)
    if unreadable is not None:
        return None, skip(store, path, unreadable, mode)
    try:
        return read_shard(
            store, path, columns, version_bound=version_bound, without_images=without_images
        ), None
    except FileNotFoundError:
        return None, BadShard(
            path=path, reason="vanished before it could be read", moved_to=None, transient=True
        )
    except VersionLookupError as exc:
        reason = redact(f"the registry's newest version is not known ({exc}); tried again at the next scan")
        log.warning("shard %s: %s", escape_control(store.url(path)), escape_control(reason))
        return None, BadShard(path=path, reason=reason, moved_to=None, transient=True)
    except NotRegularFile:
        return None, skip(store, path, "not a regular file (swapped since it was listed): never read", mode)
    except (SchemaError, pa.ArrowException, OSError, ValueError) as exc:
        reason = redact(f"{type(exc).__name__}: {exc}")
        return None, quarantine(store, path, reason, mode)


def today_utc() -> date:
    """The date partitions are named by (UTC), read once per scan; tests pin it across midnight."""
    return datetime.now(UTC).date()


class Catalog:
    """In-memory set of handled shard paths, with an optional persisted copy (see `storage.replay`).

    Which partitions a scan lists: the first scan (and every `full_scan_every`-th, if > 0) lists
    everything; any other lists the `date=` partitions on or after `min(newest, today UTC) -
    slack_days`, where `newest` is the newest partition any earlier scan saw. Collectors name the
    partition by their UTC clock when they write, so the slack covers a shard that lands in
    yesterday's partition after today's appeared (a writer whose flush spanned midnight, a clock
    a little behind). A shard written into a partition older than the slack after the bound has
    passed it is found only by the next full scan: the next process's first scan, or the periodic
    one. Capping `newest` at today keeps a collector whose clock runs ahead (a partition dated in the
    future) from moving the bound past the partitions that others are still writing.
    """

    def __init__(
        self, store: Store, known: Iterable[str] = (), *, slack_days: int = 1, full_scan_every: int = 0
    ) -> None:
        self.store = store
        self.known: set[str] = set(known)
        self.slack_days = slack_days
        self.full_scan_every = full_scan_every
        self.newest: date | None = None  # newest `date=` partition seen; None until a scan saw one
        self.scans = 0
        self.last_since: date | None = None  # the last scan's bound (None: it listed everything)
        # Shards a scan returned that nobody has handled yet (an ingest cut short by `max_shards` or
        # an error): a later, bounded listing may no longer reach their partition.
        self.pending: dict[str, ShardInfo] = {}

    def since(self) -> date | None:
        """The bound of the next scan: None (list everything) or the oldest partition it lists."""
        periodic = self.full_scan_every > 0 and self.scans % self.full_scan_every == 0
        if self.newest is None or periodic:
            return None
        return min(self.newest, today_utc()) - timedelta(days=self.slack_days)

    def scan(self) -> list[ShardInfo]:
        """Shards not yet handled, oldest first."""
        self.last_since = self.since()
        listed = list_shards(self.store, self.last_since)
        self.scans += 1
        newest = newest_partition(s.path for s in listed)
        if newest is not None and (self.newest is None or newest > self.newest):
            self.newest = newest
        new = {s.path: s for s in self.pending.values() if s.path not in self.known}
        new.update((s.path, s) for s in listed if s.path not in self.known)
        self.pending = new
        return sorted(new.values(), key=lambda s: (s.mtime, s.path))

    def mark(self, path: str) -> None:
        self.known.add(path)
        self.pending.pop(path, None)

    def forget(self, path: str) -> None:
        """Drop a shard that vanished before it was read; a later listing finds it if it comes back."""
        self.pending.pop(path, None)


def is_trajectory_path(store: Store, path: str) -> bool:
    return path.startswith(store.path(TRAJECTORIES_DIR) + "/")
