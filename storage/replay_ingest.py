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

from pydantic import ByteSize

from storage.catalog import BadShard, VersionLookupError, quarantine
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
