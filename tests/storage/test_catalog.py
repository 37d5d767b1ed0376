from __future__ import annotations

import io
import logging

import boto3
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from storage.catalog import list_shards
from storage.replay import Replay
from storage.replay_config import ReplaySettings
from storage.schema import SCHEMA_VERSION_KEY
from storage.shards import ShardWriter, ShardWriterConfig
from storage.store import Store, atomic_put
from storage.synthetic import synthetic_episode


def _write_good(store: Store, episodes: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    config = ShardWriterConfig(pool="pool_a", collector_id=f"good{seed}", flush_episodes=2, flush_seconds=0)
    with ShardWriter(store, config) as writer:
        for _ in range(episodes):
            writer.add_episode(synthetic_episode(rng))


def _bad_shards(store: Store) -> dict[str, bytes]:
    good = io.BytesIO()
    pq.write_table(synthetic_episode(np.random.default_rng(9)), good)
    foreign = io.BytesIO()
    pq.write_table(pa.table({"x": [1, 2, 3]}), foreign)
    versioned_foreign = io.BytesIO()
    pq.write_table(
        pa.table({"x": [1]}).replace_schema_metadata({SCHEMA_VERSION_KEY: b"1.0"}), versioned_foreign
    )
    future = io.BytesIO()
    table = synthetic_episode(np.random.default_rng(10))
    pq.write_table(table.replace_schema_metadata({SCHEMA_VERSION_KEY: b"2.0"}), future)
    base = store.path("trajectories", "pool=pool_a", "date=2026-11-01")
    return {
        f"{base}/corrupt-000000-a.parquet": b"not a parquet file at all",
        f"{base}/half-000000-b.parquet": good.getvalue()[: len(good.getvalue()) // 2],
        f"{base}/foreign-000000-c.parquet": foreign.getvalue(),
        f"{base}/future-000000-d.parquet": future.getvalue(),
        f"{base}/renamed-000000-e.parquet": versioned_foreign.getvalue(),
    }


def test_bad_shards_are_quarantined_and_the_rest_ingested(any_store: Store, caplog) -> None:
    _write_good(any_store, 6)
    bad = _bad_shards(any_store)
    for path, payload in bad.items():
        atomic_put(any_store, path, payload)
    replay = Replay(any_store, ReplaySettings(min_size_steps=1))
    with caplog.at_level(logging.WARNING, logger="storage.catalog"):
        report = replay.ingest()
    assert report.quarantined == 5
    assert report.shards == 3 and report.episodes == 6
    remaining = {s.path for s in list_shards(any_store)}
    assert not remaining & bad.keys(), "bad shards must leave trajectories/"
    moved = any_store.fs.find(any_store.quarantine)
    assert len(moved) == 5
    messages = [r.getMessage() for r in caplog.records if "quarantined" in r.getMessage()]
    assert len(messages) == 5
    assert any("major version 2" in m for m in messages)
    assert any("missing field" in m for m in messages)
    assert any("not written by distrl" in m for m in messages)
    assert any("magic bytes" in m for m in messages)
    # A second scan neither re-reads nor re-logs anything.
    caplog.clear()
    assert replay.ingest().shards == 0
    assert not [r for r in caplog.records if "quarantined" in r.getMessage()]
    replay.close()


def test_scan_is_incremental(local_store: Store) -> None:
    replay = Replay(local_store, ReplaySettings(min_size_steps=1))
    _write_good(local_store, 4, seed=1)
    first = replay.ingest()
    _write_good(local_store, 2, seed=2)
    second = replay.ingest()
    assert (first.shards, second.shards) == (2, 1)
    assert (first.episodes, second.episodes) == (4, 2)
    assert replay.episodes == 6
    replay.close()


def test_a_shard_written_by_another_process_into_a_listed_folder_is_ingested(
    s3_store: Store, aws_env: str
) -> None:
    """s3fs caches listings: a learner must still see shards that other machines add to a folder
    it has listed before (a collector's shards of one day all land in one date folder)."""
    replay = Replay(s3_store, ReplaySettings(min_size_steps=1))
    _write_good(s3_store, 2, seed=1)
    assert replay.ingest().episodes == 2
    folder = list_shards(s3_store)[0].path.rsplit("/", 1)[0]
    shard = io.BytesIO()
    pq.write_table(synthetic_episode(np.random.default_rng(7)), shard)
    bucket, _, prefix = folder.partition("/")
    # Another machine's PUT: a separate client, so this process's s3fs cache knows nothing of it.
    boto3.client("s3", endpoint_url=aws_env, region_name="us-east-1").put_object(
        Bucket=bucket, Key=f"{prefix}/other-000000-f.parquet", Body=shard.getvalue()
    )
    assert replay.ingest().episodes == 1
    assert replay.episodes == 3
    replay.close()


def test_duplicate_episode_in_two_shards_is_ingested_once(local_store: Store) -> None:
    episode = synthetic_episode(np.random.default_rng(0))
    for name in ("dup0", "dup1"):
        with ShardWriter(local_store, ShardWriterConfig(pool="p", collector_id=name, flush_seconds=0)) as w:
            w.add_episode(episode)
    replay = Replay(local_store, ReplaySettings(min_size_steps=1))
    report = replay.ingest()
    assert (report.episodes, report.skipped_episodes) == (1, 1)
    replay.close()


def test_broken_episodes_are_kept_in_the_store_but_not_trained_on(local_store: Store) -> None:
    rng = np.random.default_rng(0)
    with ShardWriter(local_store, ShardWriterConfig(pool="p", collector_id="c", flush_seconds=0)) as w:
        w.add_episode(synthetic_episode(rng, status="env_error"))
        w.add_episode(synthetic_episode(rng, status="ok"))
    replay = Replay(local_store, ReplaySettings(min_size_steps=1))
    report = replay.ingest()
    assert (report.episodes, report.skipped_episodes) == (1, 1)
    replay.close()
