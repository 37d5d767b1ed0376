"""The replay's priorities in the store, so that a new learner resumes them (`Replay.checkpoint()`).

One parquet file per learner: every trajectory's raw priority by episode id, with the counters a
restart must keep (largest priority, policy version, steps inserted and sampled) in its schema
metadata. A snapshot is a file anyone can write to, so reading it drops priorities the sampler
cannot use.
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from storage.store import Store, atomic_put

log = logging.getLogger("storage.replay")  # the replay's own log: these records are about its state

__all__ = ["RestoredPriorities", "read_priority_snapshot", "write_priority_snapshot"]


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
    store: Store, path: str, *, max_priority: float, policy_version: int
) -> RestoredPriorities | None:
    """The snapshot at `path` (None if there is none); `max_priority` and `policy_version` are the
    values to keep where the snapshot has none."""
    if not store.fs.exists(path):
        return None
    with store.fs.open(path, "rb") as fh:
        table = pq.read_table(fh)
    meta = table.schema.metadata or {}
    restored = zip(table.column("episode_id").to_pylist(), table.column("priority").to_pylist(), strict=True)
    # A NaN, inf or non-positive priority must not reach the sampler (it would make every
    # probability NaN); those trajectories start afresh.
    priorities = {e: p for e, p in restored if p is not None and _valid_priority(p)}
    if len(priorities) < table.num_rows:
        log.warning(
            "ignored %d non-finite or non-positive priorities in %s",
            table.num_rows - len(priorities),
            store.url(path),
        )
    saved_max = float(meta.get(b"max_priority", max_priority))
    if not _valid_priority(saved_max):
        saved_max = max(priorities.values(), default=max_priority)
    return RestoredPriorities(
        priorities=priorities,
        max_priority=saved_max,
        policy_version=int(meta.get(b"policy_version", policy_version)),
        sampled_steps=int(meta.get(b"sampled_steps", 0)),
    )


def _valid_priority(value: float) -> bool:
    return bool(np.isfinite(value)) and value > 0
