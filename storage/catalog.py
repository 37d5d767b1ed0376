"""Shard discovery and safe reading: find shards not seen before, read them, set bad ones aside.

The catalog is the set of shard paths already handled. Each `scan()` lists the store and returns
only new shards. A shard that cannot be read, or whose schema or version is foreign, is moved to
`<store>/quarantine/` (mode "move", the learner) or only recorded (mode "record", read-only
readers such as `distrl sql`), logged once, and never raised: one bad file must not stop ingestion.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq

from storage.schema import SchemaError, check_schema_version, validate_schema, validate_table
from storage.store import QUARANTINE_DIR, TRAJECTORIES_DIR, Store, redact

log = logging.getLogger(__name__)

QuarantineMode = Literal["move", "record"]


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


def list_shards(store: Store) -> list[ShardInfo]:
    """Every complete shard under `trajectories/`, oldest first (temp files are hidden and skipped)."""
    root = store.trajectories
    # s3fs caches listings: without this a learner that listed a date folder once never sees the
    # shards written into it later (measured: stuck at 238 of 18,000 steps in a `distrl up` run).
    store.fs.invalidate_cache()  # the whole cache: a path argument drops only that level, not its folders
    if not store.fs.exists(root):
        return []
    found = store.fs.find(root, detail=True)
    shards = []
    for path, info in found.items():
        name = path.rsplit("/", 1)[-1]
        if not name.endswith(".parquet") or name.startswith("."):
            continue
        shards.append(ShardInfo(path=path, size=int(info.get("size") or 0), mtime=_mtime(info)))
    shards.sort(key=lambda s: (s.mtime, s.path))
    return shards


def _mtime(info: dict) -> float:
    value = info.get("mtime") or info.get("LastModified") or info.get("created") or 0.0
    return value.timestamp() if hasattr(value, "timestamp") else float(value)


def read_shard(store: Store, path: str, columns: Iterable[str] | None = None) -> pa.Table:
    """Read and validate one shard; raises `SchemaError` or `OSError`/`ArrowInvalid` if it is unusable."""
    with store.fs.open(path, "rb") as fh:
        parquet = pq.ParquetFile(fh)
        check_schema_version(parquet.schema_arrow.metadata, source=store.url(path))
        table = parquet.read(columns=list(columns) if columns is not None else None)
    if columns is None:
        validate_table(table, source=store.url(path))
    return table


def check_footer(store: Store, path: str) -> pa.Schema:
    """Cheap validity check (footer only): readable, known schema version, step schema. Returns the
    shard's schema, whose metadata holds its labels (`storage.schema.shard_host`)."""
    with store.fs.open(path, "rb") as fh:
        schema = pq.read_schema(fh)
    check_schema_version(schema.metadata, source=store.url(path))
    validate_schema(schema, source=store.url(path))
    return schema


def quarantine(store: Store, path: str, reason: str, mode: QuarantineMode) -> BadShard:
    """Set a bad shard aside (mode "move") or only record it (mode "record"); log once either way."""
    moved_to = None
    if mode == "move":
        relative = path[len(store.trajectories) :].lstrip("/")
        target = store.path(QUARANTINE_DIR, relative)
        try:
            store.fs.mv(path, target)
            moved_to = target
        except (OSError, FileNotFoundError) as exc:
            reason = f"{reason}; could not move it aside: {redact(str(exc))}"
    log.warning(
        "quarantined shard %s: %s%s",
        store.url(path),
        reason,
        f" (moved to {store.url(moved_to)})" if moved_to else "",
    )
    return BadShard(path=path, reason=reason, moved_to=moved_to)


def try_read_shard(
    store: Store, path: str, mode: QuarantineMode, columns: Iterable[str] | None = None
) -> tuple[pa.Table | None, BadShard | None]:
    """Read a shard, or quarantine it and return why; never raises for a bad file."""
    try:
        return read_shard(store, path, columns), None
    except FileNotFoundError:
        return None, BadShard(
            path=path, reason="vanished before it could be read", moved_to=None, transient=True
        )
    except (SchemaError, pa.ArrowException, OSError, ValueError) as exc:
        reason = redact(f"{type(exc).__name__}: {exc}")
        return None, quarantine(store, path, reason, mode)


class Catalog:
    """In-memory set of handled shard paths, with an optional persisted copy (see `storage.replay`)."""

    def __init__(self, store: Store, known: Iterable[str] = ()) -> None:
        self.store = store
        self.known: set[str] = set(known)

    def scan(self) -> list[ShardInfo]:
        """Shards not yet handled, oldest first."""
        return [s for s in list_shards(self.store) if s.path not in self.known]

    def mark(self, path: str) -> None:
        self.known.add(path)


def is_trajectory_path(store: Store, path: str) -> bool:
    return path.startswith(store.path(TRAJECTORIES_DIR) + "/")
