"""A full disk under the store loses nothing acknowledged and crashes nothing.

The disk is real: a 2 MiB tmpfs mounted for the test (skipped, saying why, where `mount` is not
allowed), filled to ENOSPC while a collector writes and a learner checkpoints, then freed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from bench.integrity_probes import SmallDisk
from storage.catalog import list_shards, read_shard
from storage.replay import Replay
from storage.replay_config import ReplaySettings
from storage.shards import ShardWriter, ShardWriterConfig
from storage.store import Store, open_store
from storage.synthetic import synthetic_episode
from tasks.collector import flush_shard
from tests.reliability.conftest import fill


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


class _Session:  # what flush_shard reads of a CollectorSession
    def __init__(self, writer: ShardWriter) -> None:
        self.writer = writer
        self.params = type("P", (), {"collector_id": "c0"})()


def test_a_collector_keeps_every_episode_while_the_disk_is_full(disk: SmallDisk, caplog) -> None:
    store = open_store(str(disk.path / "store"))
    config = ShardWriterConfig(
        pool="pool_a", collector_id="c0", flush_episodes=2, flush_seconds=0, retry_seconds=0.2
    )
    writer = ShardWriter(store, config)
    rng = np.random.default_rng(0)
    acked = []
    disk.fill()
    with caplog.at_level(logging.WARNING):
        for _ in range(9):  # the collector's batch loop: every episode handed over is acknowledged
            episode = synthetic_episode(rng)
            writer.add_episode(episode)
            acked.append(episode.column("episode_id")[0].as_py())
    assert writer.buffered_episodes == 9 and _stored_ids(store) == []
    full = [r for r in caplog.records if "No space left" in r.getMessage()]
    assert full and all("stay buffered" in r.getMessage() for r in full)
    # The stopping collector's last flush waits for space instead of dropping its buffer.
    threading.Timer(1.0, disk.free).start()
    flush_shard.fn(_Session(writer), wait_s=60)
    writer.close()
    assert sorted(_stored_ids(store)) == sorted(acked)


def test_a_learner_keeps_training_and_checkpoints_once_space_frees_up(disk: SmallDisk, caplog) -> None:
    store = open_store(str(disk.path / "store"))
    ids = fill(store, 6)
    settings = ReplaySettings(min_size_steps=1, samples_per_insert=None, checkpoint_every_updates=1)
    replay = Replay(store, settings)
    replay.ingest()
    disk.fill()
    with caplog.at_level(logging.WARNING, logger="storage.replay"):
        batch = replay.sample(4)
        replay.update_priorities(batch.slots, np.full(4, 7.0))  # its periodic checkpoint fails: no raise
        assert replay.try_checkpoint() is False and replay.checkpoint_pending
    lines = [r.getMessage() for r in caplog.records if "could not checkpoint" in r.getMessage()]
    assert len(lines) == 2 and all("training goes on" in line and "\n" not in line for line in lines)
    disk.free()
    assert replay.try_checkpoint() and not replay.checkpoint_pending
    expected = replay.priorities_of(ids)
    replay.close()
    again = Replay(store, settings)
    again.ingest()
    assert again.priorities_of(ids) == pytest.approx(expected)
    again.close()
