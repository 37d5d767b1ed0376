"""What the replay's ingest needs besides reading shards: the newest policy version that exists,
and what to do with a shard that does not fit in DuckDB's memory limit.

The newest version is the registry's (the learner publishes every version a collector can act
with), cached, and asked again only when a shard names a newer one: a version published a moment
ago is found, one that was never published is a violation, and a registry that cannot answer
leaves the shard for the next scan rather than quarantining good data.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import ByteSize

from storage.catalog import BadShard, VersionLookupError, quarantine
from storage.schema import conform
from storage.sql_limits import QueryLimits
from storage.store import Store, redact


class NewestVersion:
    """The newest policy version known to exist; `bound` is a `storage.catalog.VersionBound`."""

    def __init__(self, lookup: Callable[[], int | None] | None, *, known: int = 0) -> None:
        self.lookup = lookup  # None: no registry (tests, benches), so no bound beyond the schema's
        self.known = known
        self._lock = threading.Lock()

    def saw(self, version: int) -> None:
        """A version that exists (one the learner resumed from or published)."""
        with self._lock:
            self.known = max(self.known, version)

    def bound(self, largest: int) -> int | None:
        """The newest version that exists, asking the registry again if `largest` is beyond the cache."""
        if self.lookup is None:
            return None
        if largest <= self.known:
            return self.known
        try:
            newest = self.lookup()
        except Exception as exc:  # an outage of the registry: not the shard's fault
            raise VersionLookupError(redact(f"{type(exc).__name__}: {exc}")) from None
        if newest is not None:
            self.saw(newest)
        return self.known


def quarantine_for_memory(store: Store, path: str, limits: QueryLimits, detail: str) -> BadShard:
    """Set aside a shard that alone does not fit in the replay's DuckDB memory (or spill) limit."""
    spill = "spill" in detail.lower() or "temp" in detail.lower()
    setting = "DISTRL_SQL_MAX_SPILL" if spill else "DISTRL_SQL_MEMORY_LIMIT"
    size = ByteSize(limits.settings.max_spill if spill else limits.settings.memory_limit).human_readable()
    reason = (
        f"does not fit in the replay's DuckDB {'spill space' if spill else 'memory'} ({setting}={size}) alone"
    )
    return quarantine(store, path, reason + "; raise the limit to ingest it", "move")


@dataclass(frozen=True)
class IngestReport:
    shards: int = 0
    transactions: int = 0  # DuckDB transactions the shards went in (one per batch)
    quarantined: int = 0
    episodes: int = 0
    steps: int = 0
    skipped_episodes: int = 0
    evicted_episodes: int = 0


def shard_steps(
    batch: list[tuple[str, pa.Table]], *, keep_screenshots: bool
) -> tuple[pa.Table, list[int], int]:
    """A batch of shards as one table of steps (one column order, so that they concatenate), each
    row tagged with its place (`__row`) and its shard (`__shard`); the rows of each shard, and the
    episodes the batch holds."""
    tables = [conform(table) for _, table in batch]
    all_episodes = sum(len(pc.unique(t.column("episode_id"))) for t in tables)
    table = pa.concat_tables(tables)
    if not keep_screenshots:
        table = table.set_column(
            table.schema.get_field_index("screenshot_png"),
            "screenshot_png",
            pa.nulls(table.num_rows, pa.binary()),
        )
    rows = [t.num_rows for t in tables]
    table = table.append_column("__row", pa.array(np.arange(table.num_rows))).append_column(
        "__shard", pa.array(np.repeat(np.arange(len(tables)), rows))
    )
    return table, rows, all_episodes
