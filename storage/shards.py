"""Buffered, atomic Parquet shard writing for one collector.

A collector hands over whole episodes; the writer buffers them and flushes a shard after
`flush_episodes` episodes, after `flush_seconds` (from a background timer, so an idle collector
does not sit on data) or on `close()`. An episode is never split across shards. A shard becomes
visible only once complete: locally it is written to a hidden temp file, fsynced and renamed (a
killed writer's temp is swept by the next writer, see `storage.store.sweep_stale_temps`), on S3 it
is a single PUT. A flush that fails after its retries keeps the buffer and raises `ShardFlushError`.

An episode handed over is acknowledged: a flush that `add_episode` or the timer starts and that
fails (a full disk, an unreachable store) keeps the buffer, says so in one warning line, and is
tried again no sooner than `retry_seconds` later (one warning when writes start failing and one
when they work again, not one per retry). A full disk (ENOSPC, EDQUOT) is not retried within a
flush: space does not come back in milliseconds.

The buffer is bounded: past `max_buffered_episodes` or `max_buffered_bytes`, `has_room` is False and
the collector pauses acting (`wait_for_room`) until a flush succeeds, instead of holding every
episode of a long outage in memory. An episode already run is still taken, so the buffer holds at
most the cap plus the batch that was running when it was reached.
"""

from __future__ import annotations

import errno
import io
import logging
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq

from storage.schema import STEP_SCHEMA, conform, shard_metadata, validate_table
from storage.store import Store, atomic_put, redact, store_errors, sweep_stale_temps

log = logging.getLogger(__name__)

_FULL = {errno.ENOSPC, errno.EDQUOT}  # the store's disk or quota is full
_SAFE_ID = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")


class ShardFlushError(RuntimeError):
    """A shard could not be written; the episodes stay buffered and the next flush retries them."""


@dataclass(frozen=True)
class ShardWriterConfig:
    """How one collector batches episodes into shards."""

    pool: str
    """Agent pool; becomes the `pool=` partition of the shard path."""
    collector_id: str
    """Collector name, unique within the pool; prefixes the shard file name."""
    flush_episodes: int = 32
    """Flush once this many episodes are buffered."""
    flush_seconds: float = 60.0
    """Flush buffered episodes at least this often (0 disables the timer)."""
    max_attempts: int = 5
    """Attempts per flush before `ShardFlushError` (transient S3 errors are common)."""
    backoff_s: float = 0.2
    """First retry delay; doubles per attempt, with jitter."""
    compression: str = "zstd"
    """Parquet compression codec."""
    retry_seconds: float = 5.0
    """After a failed automatic flush, wait this long before `add_episode` tries again."""
    max_buffered_episodes: int = 512
    """Episodes the buffer holds before `has_room` turns False (the collector then pauses acting)."""
    max_buffered_bytes: int = 512 * 1024 * 1024
    """Bytes (Arrow, screenshots included) the buffer holds before `has_room` turns False."""
    host: str = field(default_factory=socket.gethostname)
    """Machine that writes the shards, stored in each shard's metadata (`distrl.host`): which host
    a shard came from stays known when collectors of one pool move between machines."""

    def __post_init__(self) -> None:
        for name in ("pool", "collector_id"):
            value = getattr(self, name)
            if not value or not set(value) <= _SAFE_ID or value.startswith("."):
                raise ValueError(
                    f"ShardWriterConfig.{name}={value!r}: use letters, digits, '_' and '.', not starting with '.'"
                    " (it becomes part of the shard path, whose name parts are split on '-')"
                )
        if self.flush_episodes < 1:
            raise ValueError("ShardWriterConfig.flush_episodes must be >= 1")
        if self.max_buffered_episodes < self.flush_episodes or self.max_buffered_bytes < 1:
            raise ValueError(
                "ShardWriterConfig.max_buffered_episodes must be >= flush_episodes (a shard must fit) "
                "and max_buffered_bytes >= 1"
            )
        if self.flush_seconds < 0 or self.max_attempts < 1 or self.backoff_s < 0 or self.retry_seconds < 0:
            raise ValueError(
                "ShardWriterConfig: flush_seconds, backoff_s, retry_seconds >= 0 and max_attempts >= 1"
            )


def shard_dir(store: Store, pool: str, day: str) -> str:
    return store.path("trajectories", f"pool={pool}", f"date={day}")


class ShardWriter:
    """Thread-safe episode buffer that writes atomic Parquet shards to a `Store`."""

    def __init__(self, store: Store, config: ShardWriterConfig) -> None:
        self.store = store
        self.config = config
        self._buffer: list[pa.Table] = []
        self._buffered_bytes = 0
        self._failing = False  # the last flush failed (said once, until one succeeds)
        self._buffered_since: float | None = None
        self._seq = 0
        self._lock = threading.RLock()
        self._closed = False
        self._stop = threading.Event()
        self.written: list[str] = []
        self.last_error: str | None = None
        self._retry_after = 0.0  # monotonic time before which add_episode does not flush again
        self._timer: threading.Thread | None = None
        try:  # leftovers of writers killed mid-flush (never a live one's: see sweep_stale_temps)
            sweep_stale_temps(store)
        except OSError as exc:
            log.warning("could not sweep stale temp files: %s", redact(str(exc)))
        if config.flush_seconds > 0:
            self._timer = threading.Thread(target=self._timer_loop, name=f"shard-timer-{config.collector_id}")
            self._timer.daemon = True
            self._timer.start()

    @property
    def buffered_episodes(self) -> int:
        with self._lock:
            return len(self._buffer)

    @property
    def buffered_bytes(self) -> int:
        with self._lock:
            return self._buffered_bytes

    @property
    def has_room(self) -> bool:
        """Whether the buffer is below both caps (a collector may start another batch)."""
        with self._lock:
            return (
                len(self._buffer) < self.config.max_buffered_episodes
                and self._buffered_bytes < self.config.max_buffered_bytes
            )

    def wait_for_room(self, should_stop: Callable[[], bool], poll_s: float = 0.5) -> bool:
        """Flush every `retry_seconds` until the buffer has room (True) or `should_stop()` (False)."""
        while not self.has_room:
            if should_stop():
                return False
            with self._lock:
                if time.monotonic() >= self._retry_after:
                    self._flush_or_keep("flush")
            if not self.has_room:
                self._stop.wait(min(poll_s, max(self.config.retry_seconds, 0.01)))
        return True

    def add_episode(self, steps: pa.Table) -> str | None:
        """Buffer one whole episode (all its steps); returns the shard path if this triggered a flush.
        A failed flush does not raise: the episode is buffered (acknowledged) and retried later."""
        if self._closed:
            raise RuntimeError("ShardWriter is closed; create a new writer")
        steps = conform(steps)
        validate_table(steps, source=f"episode from {self.config.collector_id}")
        episode_ids = steps.column("episode_id").unique()
        if len(episode_ids) != 1:
            raise ValueError(f"add_episode takes one episode's steps; got {len(episode_ids)} episode ids")
        with self._lock:
            self._buffer.append(steps)
            self._buffered_bytes += steps.nbytes
            if self._buffered_since is None:
                self._buffered_since = time.monotonic()
            if len(self._buffer) >= self.config.flush_episodes and time.monotonic() >= self._retry_after:
                return self._flush_or_keep("flush")
        return None

    def _flush_or_keep(self, what: str) -> str | None:
        try:
            path = self.flush()
        except ShardFlushError as exc:
            self.last_error = str(exc)
            self._retry_after = time.monotonic() + self.config.retry_seconds
            # Once per outage, not once per retry: a full disk for an hour was 720 lines per collector.
            log.log(
                logging.DEBUG if self._failing else logging.WARNING,
                "%s failed, retrying every %gs (said once until a write succeeds): %s",
                what, self.config.retry_seconds, exc,
            )  # fmt: skip
            self._failing = True
            return None
        return path

    def flush(self) -> str | None:
        """Write everything buffered as one shard; keeps the buffer and raises if every attempt fails."""
        with self._lock:
            if not self._buffer:
                return None
            table = pa.concat_tables(self._buffer)
            payload = _to_parquet_bytes(table, self.config.compression, self.config.host)
            day = datetime.now(UTC).strftime("%Y-%m-%d")
            name = f"{self.config.collector_id}-{self._seq:06d}-{uuid.uuid4().hex[:12]}.parquet"
            path = f"{shard_dir(self.store, self.config.pool, day)}/{name}"
            self._put_with_retries(path, payload, episodes=len(self._buffer))
            self._seq += 1
            self._buffer.clear()
            self._buffered_bytes = 0
            self._buffered_since = None
            self.written.append(path)
            if self._failing:
                log.warning("shard writes work again: wrote %s", self.store.url(path))
            self.last_error, self._failing = None, False
            log.info("wrote shard %s (%d steps)", self.store.url(path), table.num_rows)
            return path

    def close(self) -> None:
        """Flush what is buffered and stop the timer; raises `ShardFlushError` if the last flush fails."""
        self._stop.set()
        if self._timer is not None:
            self._timer.join(timeout=5)
        with self._lock:
            self.flush()
            self._closed = True

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _timer_loop(self) -> None:
        period = min(self.config.flush_seconds, 1.0)
        while not self._stop.wait(period):
            with self._lock:
                due = (
                    self._buffered_since is not None
                    and time.monotonic() - self._buffered_since >= self.config.flush_seconds
                )
                if not due or time.monotonic() < self._retry_after:
                    continue
                # The buffer is intact on failure; a later tick, add_episode or close() retries it.
                self._flush_or_keep("timed flush")

    def _put_with_retries(self, path: str, payload: bytes, *, episodes: int) -> None:
        delay = self.config.backoff_s
        last: Exception | None = None
        for attempt in range(1, self.config.max_attempts + 1):
            try:
                atomic_put(self.store, path, payload)
                return
            except store_errors() as exc:  # an S3 answer (OSError) or a lost connection (botocore's)
                last = exc
                if getattr(exc, "errno", None) in _FULL:
                    break  # one line from the caller, not one per attempt
                log.warning(
                    "shard write attempt %d/%d to %s failed: %s",
                    attempt,
                    self.config.max_attempts,
                    self.store.url(path),
                    redact(f"{type(exc).__name__}: {exc}"),
                )
                if attempt < self.config.max_attempts:
                    time.sleep(delay * (1 + random.random()))
                    delay *= 2
        tries = "" if getattr(last, "errno", None) in _FULL else f" after {self.config.max_attempts} attempts"
        raise ShardFlushError(
            redact(
                f"could not write shard {self.store.url(path)}{tries} "
                f"({type(last).__name__}: {last}); {episodes} episodes stay buffered and the next flush "
                "retries them. Check the store URI, the S3 endpoint and credentials, and free space."
            )
        ) from None


def _to_parquet_bytes(table: pa.Table, compression: str, host: str) -> bytes:
    sink = io.BytesIO()
    labelled = table.cast(STEP_SCHEMA).replace_schema_metadata(shard_metadata(host))
    pq.write_table(labelled, sink, compression=compression)
    return sink.getvalue()
