"""The replay's priorities in the store, so that a new learner resumes them (`Replay.checkpoint()`).

One parquet file per learner: every trajectory's raw priority by episode id, with the counters a
restart must keep (largest priority, policy version, steps inserted and sampled) in its schema
metadata. A snapshot is a file anyone can write to, so reading it drops priorities the sampler
cannot use, and a snapshot that cannot be trusted as a whole (unreadable, a column missing or of
the wrong type, a counter that is not a number or is impossible) raises `SnapshotDamaged`; the
replay then sets the file aside and starts from the shards' initial priorities.

"Impossible" is judged against the replay's real sizes, not only the snapshot's own numbers: its
sampled steps must be within what the ratio allows for the steps the store's shards hold (with
inserted_steps=10^18 and sampled_steps=10^15 the ratio check passed, and the restored sampled
counter then blocked every sample, forever, since inserts are counted again only as the shards are
re-ingested). Priorities are
kept within (0, `MAX_PRIORITY`]: larger ones are lowered to it with a warning (10^308 with alpha=1
overflowed the sampler's sums and made every importance weight NaN).
"""

from __future__ import annotations

import io
import logging
import math
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from storage.catalog import list_shards
from storage.store import Store, atomic_put

log = logging.getLogger("storage.replay")  # the replay's own log: these records are about its state

# The largest priority the replay keeps (restored or written back). A loss's priorities are errors
# of order 1; this is far above any of them, and a sum of priority**alpha over 10^9 trajectories
# stays a finite float64 (10^308 did not: the sampler's sums became inf, every weight NaN).
MAX_PRIORITY = 1e12

__all__ = [
    "MAX_PRIORITY",
    "RestoredPriorities",
    "SnapshotDamaged",
    "read_priority_snapshot",
    "set_aside",
    "write_priority_snapshot",
]


class SnapshotDamaged(ValueError):
    """The priority snapshot cannot be used; the message says what is wrong with it."""


@dataclass(frozen=True)
class RestoredPriorities:
    """What a snapshot gives a fresh replay: priorities by episode id and the counters to resume."""

    priorities: dict[str, float]  # finite and positive only
    max_priority: float
    policy_version: int
    sampled_steps: int


def write_priority_snapshot(
    store: Store,
    path: str,
    priorities: pa.Table,
    *,
    max_priority: float,
    inserted_steps: int,
    sampled_steps: int,
    policy_version: int,
) -> None:
    """Atomically replace the snapshot at `path` with `priorities` (episode_id, priority) and the counters."""
    table = priorities.replace_schema_metadata(
        {
            b"max_priority": str(max_priority).encode(),
            b"inserted_steps": str(inserted_steps).encode(),
            b"sampled_steps": str(sampled_steps).encode(),
            b"policy_version": str(policy_version).encode(),
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink)
    atomic_put(store, path, sink.getvalue())


def read_priority_snapshot(
    store: Store,
    path: str,
    *,
    max_priority: float,
    policy_version: int,
    max_samples_per_insert: float | None = None,
    error_buffer: float = 0.0,
) -> RestoredPriorities | None:
    """The snapshot at `path` (None if there is none, or if it is damaged: then it is set aside with
    a warning naming it); `max_priority` and `policy_version` are the values to keep where the
    snapshot has none. With `max_samples_per_insert`, a snapshot claiming more sampled steps than the
    ratio allows for its inserted steps is damaged: restoring it would block sampling until that many
    steps were inserted again. So is one whose sampled steps are more than the ratio allows for the
    steps the store's shards hold: the replay counts inserts again from those shards, and would
    not sample until that many new steps were written (the footers read stop once enough are found)."""
    if not store.fs.exists(path):
        return None
    try:
        return _read(store, path, max_priority, policy_version, max_samples_per_insert, error_buffer)
    except SnapshotDamaged as exc:
        set_aside(store, path, str(exc))
        return None


def stored_steps(store: Store, enough: int) -> int:
    """Steps in the store's shards, from their footers (unreadable ones count 0); stops counting
    once `enough` is reached."""
    total = 0
    for shard in list_shards(store):
        try:
            with store.fs.open(shard.path, "rb") as fh:
                total += pq.read_metadata(fh).num_rows
        except (pa.ArrowException, OSError, ValueError):
            continue  # ingest quarantines it; its rows are never inserted
        if total >= enough:
            break
    return total


def _read(
    store: Store,
    path: str,
    max_priority: float,
    policy_version: int,
    max_samples_per_insert: float | None,
    error_buffer: float,
) -> RestoredPriorities:
    try:
        with store.fs.open(path, "rb") as fh:
            table = pq.read_table(fh)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise SnapshotDamaged(f"not a readable Parquet file ({type(exc).__name__}: {exc})") from None
    for name, ok in (("episode_id", pa.types.is_string), ("priority", _is_number)):
        if name not in table.column_names:
            raise SnapshotDamaged(f"column {name!r} is missing")
        if not ok(table.schema.field(name).type):
            raise SnapshotDamaged(f"column {name!r} has type {table.schema.field(name).type}")
    meta = table.schema.metadata or {}
    sampled = _checked_sampled(store, meta, max_samples_per_insert, error_buffer)
    version = _counter(meta, b"policy_version", policy_version)
    restored = zip(table.column("episode_id").to_pylist(), table.column("priority").to_pylist(), strict=True)
    # A NaN, inf or non-positive priority must not reach the sampler (it would make every
    # probability NaN); those trajectories start afresh.
    priorities = {e: float(p) for e, p in restored if e is not None and p is not None and _valid_priority(p)}
    if len(priorities) < table.num_rows:
        log.warning(
            "ignored %d non-finite or non-positive priorities in %s",
            table.num_rows - len(priorities),
            store.url(path),
        )
    too_large = sum(1 for p in priorities.values() if p > MAX_PRIORITY)
    if too_large:
        priorities = {e: min(p, MAX_PRIORITY) for e, p in priorities.items()}
        log.warning(
            "lowered %d priorities above MAX_PRIORITY=%g in %s to it",
            too_large,
            MAX_PRIORITY,
            store.url(path),
        )
    try:
        saved_max = float(meta.get(b"max_priority", max_priority))
    except ValueError:
        raise SnapshotDamaged(f"max_priority={meta[b'max_priority']!r} is not a number") from None
    if not _valid_priority(saved_max):
        saved_max = max(priorities.values(), default=max_priority)
    saved_max = min(saved_max, MAX_PRIORITY)
    return RestoredPriorities(
        priorities=priorities, max_priority=saved_max, policy_version=version, sampled_steps=sampled
    )


def _checked_sampled(
    store: Store, meta: dict[bytes, bytes], max_samples_per_insert: float | None, error_buffer: float
) -> int:
    """The snapshot's sampled steps, once its counters are possible for this replay and this store."""
    inserted = _counter(meta, b"inserted_steps", 0)
    sampled = _counter(meta, b"sampled_steps", 0)
    if max_samples_per_insert is not None and sampled > max_samples_per_insert * inserted + error_buffer:
        raise SnapshotDamaged(
            f"sampled_steps={sampled} is more than samples_per_insert={max_samples_per_insert:g} allows for "
            f"its inserted_steps={inserted} (+ {error_buffer:g})"
        )
    if max_samples_per_insert is None or sampled <= error_buffer:
        return sampled  # no ratio to block sampling (the next start with one checks again)
    needed = math.ceil((sampled - error_buffer) / max_samples_per_insert)
    if (held := stored_steps(store, needed)) < needed:
        raise SnapshotDamaged(
            f"its sampled_steps={sampled} (inserted_steps={inserted}) need {needed} inserted steps under "
            f"samples_per_insert={max_samples_per_insert:g}, but the store's shards hold {held}: restoring "
            "it would block sampling until that many more steps were written"
        )
    return sampled


def set_aside(store: Store, path: str, reason: str) -> str:
    """Rename a damaged snapshot to `<name>.bad-<UTC timestamp>` (kept for a person to look at, out of
    the next start's way) and say so; returns the new path."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    aside = f"{path}.bad-{stamp}"
    store.fs.mv(path, aside)
    log.warning(
        "priority snapshot %s is damaged (%s): set aside as %s; starting from the shards' initial priorities",
        store.url(path), reason, store.url(aside),
    )  # fmt: skip
    return aside


def _is_number(kind: pa.DataType) -> bool:
    return pa.types.is_floating(kind) or pa.types.is_integer(kind)


def _counter(meta: dict[bytes, bytes], key: bytes, default: int) -> int:
    raw = meta.get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SnapshotDamaged(f"{key.decode()}={raw[:40]!r} is not a whole number") from None
    if value < 0:
        raise SnapshotDamaged(f"{key.decode()}={value} is negative")
    return value


def _valid_priority(value: float) -> bool:
    return bool(np.isfinite(value)) and value > 0
