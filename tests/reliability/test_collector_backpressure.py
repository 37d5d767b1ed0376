"""On a full disk the collector's shard buffer stops at its cap: the collector pauses acting (said
once), keeps every episode already run, and goes on once space frees up. The disk is real: a small
tmpfs filled to ENOSPC (skipped, saying why, where `mount` is not allowed)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from bench.integrity_probes import SmallDisk
from storage.catalog import list_shards, read_shard
from storage.shards import ShardWriter, ShardWriterConfig
from storage.store import Store, open_store
from storage.synthetic import synthetic_episode
from tasks.collector import run_batch, wait_for_room

CAP = 4


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[SmallDisk]:
    try:
        small = SmallDisk(tmp_path / "small")
    except (PermissionError, FileNotFoundError) as exc:
        pytest.skip(f"needs a tmpfs mount (root): {exc}")
    yield small
    small.unmount()


def _stored_ids(store: Store) -> list[str]:
    ids: list[str] = []
    for shard in list_shards(store):
        ids += list(dict.fromkeys(read_shard(store, shard.path).column("episode_id").to_pylist()))
    return ids


def _writer(store: Store) -> ShardWriter:
    config = ShardWriterConfig(
        pool="pool_a", collector_id="c0", flush_episodes=2, flush_seconds=0, retry_seconds=0.05,
        max_buffered_episodes=CAP,
    )  # fmt: skip
    return ShardWriter(store, config)


def _session(writer: ShardWriter, should_stop) -> SimpleNamespace:  # what the collector reads of a session
    params = SimpleNamespace(collector_id="c0")
    return SimpleNamespace(writer=writer, params=params, should_stop=should_stop, policy=None, version=None)


def _fill_to_cap(writer: ShardWriter, rng: np.random.Generator) -> list[str]:
    acked = []
    while writer.has_room:
        episode = synthetic_episode(rng)
        writer.add_episode(episode)
        acked.append(episode.column("episode_id")[0].as_py())
    return acked


def test_a_full_buffer_pauses_acting_once_and_resumes_when_space_frees(disk: SmallDisk, caplog) -> None:
    store = open_store(str(disk.path / "store"))
    writer = _writer(store)
    disk.fill()
    with caplog.at_level(logging.WARNING):
        acked = _fill_to_cap(writer, np.random.default_rng(0))
        assert len(acked) == CAP and writer.buffered_episodes == CAP and not writer.has_room
        threading.Timer(1.0, disk.free).start()
        assert wait_for_room(_session(writer, lambda: False))  # many failed flushes while paused
    messages = [r.getMessage() for r in caplog.records]
    assert sum("acting paused" in m for m in messages) == 1, messages
    assert sum("acting again" in m for m in messages) == 1, messages
    assert sum("failed, retrying" in m for m in messages) <= 1, messages  # not one line per retry
    assert writer.has_room and sorted(_stored_ids(store)) == sorted(acked)
    writer.close()


def test_a_stop_while_paused_runs_no_batch_and_loses_nothing(disk: SmallDisk) -> None:
    store = open_store(str(disk.path / "store"))
    writer = _writer(store)
    disk.fill()
    acked = _fill_to_cap(writer, np.random.default_rng(1))
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    # No policy is loaded: run_batch would raise if it went on to act instead of waiting.
    stats = run_batch(_session(writer, stop.is_set))  # type: ignore[arg-type]
    assert stats["episodes"] == 0 and writer.buffered_episodes == CAP
    disk.free()
    writer.close()
    assert sorted(_stored_ids(store)) == sorted(acked)


def test_the_cap_counts_bytes_too(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "store"))
    config = ShardWriterConfig(
        pool="p",
        collector_id="c0",
        flush_episodes=50,
        flush_seconds=0,
        max_buffered_episodes=50,
        max_buffered_bytes=1,
    )
    writer = ShardWriter(store, config)
    assert writer.has_room
    writer.add_episode(synthetic_episode(np.random.default_rng(2)))
    assert not writer.has_room and writer.buffered_bytes > 1
    assert writer.wait_for_room(lambda: False)  # a flush to a working store makes room
    assert writer.has_room and writer.buffered_bytes == 0
    writer.close()


def test_a_cap_below_one_shard_is_refused() -> None:
    with pytest.raises(ValueError, match="max_buffered_episodes must be >= flush_episodes"):
        ShardWriterConfig(pool="p", collector_id="c0", flush_episodes=8, max_buffered_episodes=4)
