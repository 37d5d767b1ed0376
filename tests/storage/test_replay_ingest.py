"""Batched ingest: many shards per DuckDB transaction, the same replay as one shard at a time."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import storage.replay
from storage.replay import Replay
from storage.replay_config import ReplaySettings
from storage.shards import ShardWriter, ShardWriterConfig, shard_dir
from storage.store import Store, atomic_put, open_store
from storage.synthetic import synthetic_episode

SETTINGS = {"min_size_steps": 1, "samples_per_insert": None, "block_size": 4, "super_size": 3}


def _fill(store: Store, shards: int) -> None:
    """`shards` shards of 2 episodes, one broken episode, one episode in two shards, one bad shard."""
    rng = np.random.default_rng(0)
    config = ShardWriterConfig(pool="p", collector_id="c0", flush_episodes=2, flush_seconds=0)
    with ShardWriter(store, config) as writer:
        for i in range(2 * shards - 4):
            status = "env_error" if i == 7 else "ok"
            writer.add_episode(synthetic_episode(rng, n_steps=int(rng.integers(1, 5)), status=status))
    twice = synthetic_episode(rng, n_steps=3)
    for name in ("dup0", "dup1"):
        with ShardWriter(store, ShardWriterConfig(pool="p", collector_id=name, flush_seconds=0)) as writer:
            writer.add_episode(twice)
            writer.add_episode(synthetic_episode(rng, n_steps=2))
    atomic_put(store, f"{shard_dir(store, 'p', '2026-11-30')}/bad-000000-x.parquet", b"not parquet")


def _contents(replay: Replay) -> dict[str, list]:
    root = len(replay.store.root)
    queries = {
        "episodes": "SELECT slot, episode_id, substr(shard, $root), n_steps, policy_version, success "
        "FROM episodes ORDER BY slot",
        "steps": "SELECT * EXCLUDE (screenshot_png) FROM steps ORDER BY slot, step",
        "blocks": "SELECT block, ps, vs, ws, wsum, npos FROM blocks ORDER BY block",
        "supers": "SELECT * FROM supers ORDER BY super",
        "shards": "SELECT substr(path, $root), status, rows, episodes FROM shards ORDER BY 1",
        "meta": "SELECT * FROM replay_meta ORDER BY key",
    }
    params = {"root": root + 1}
    return {
        name: replay.con.execute(q, params if "$root" in q else None).fetchall()
        for name, q in queries.items()
    }


def _transactions(replay: Replay) -> int:
    """Distinct commit stamps of ingested shards: DuckDB's current_timestamp is the transaction's start."""
    query = "SELECT count(DISTINCT ingested_at) FROM shards WHERE status = 'ingested'"
    return replay.con.execute(query).fetchall()[0][0]


def test_fifty_shards_go_in_a_few_transactions_with_the_same_contents(tmp_path) -> None:
    one = open_store(str(tmp_path / "one"))
    _fill(one, 50)
    many = open_store(str(tmp_path / "many"))
    shutil.copytree(one.root, many.root)  # the same files (and times): the bad shard is moved per store
    single = Replay(one, ReplaySettings(**SETTINGS, ingest_batch_shards=1, capacity_steps=200))
    batched = Replay(many, ReplaySettings(**SETTINGS, ingest_batch_shards=16, capacity_steps=200))
    a, b = single.ingest(), batched.ingest()
    assert (a.shards, a.quarantined, a.transactions, b.transactions) == (50, 1, 50, 4)
    assert {**vars(a), "transactions": 0} == {**vars(b), "transactions": 0}
    assert a.skipped_episodes == 2 and a.evicted_episodes > 0  # the broken and the duplicate episode
    assert (_transactions(single), _transactions(batched)) == (50, 4)
    assert _contents(single) == _contents(batched)
    assert (single.next_slot, single.size_steps) == (batched.next_slot, batched.size_steps)
    single.close()
    batched.close()


def test_a_crash_between_batches_loses_and_repeats_nothing(local_store: Store, tmp_path, monkeypatch) -> None:
    _fill(local_store, 30)
    reference = Replay(local_store, ReplaySettings(**SETTINGS))
    reference.ingest()  # moves the bad shard aside first, so that both see the same 30 shards
    db = str(tmp_path / "replay.duckdb")
    learner = Replay(local_store, ReplaySettings(**SETTINGS, db_path=db, ingest_batch_shards=8))
    reads = 0
    real_read = storage.replay.try_read_shard

    def dies_at_the_20th_read(*args, **kwargs):
        nonlocal reads
        reads += 1
        if reads == 20:  # two batches (16 shards) committed, the third half read
            raise SystemExit("killed")
        return real_read(*args, **kwargs)

    monkeypatch.setattr(storage.replay, "try_read_shard", dies_at_the_20th_read)
    with pytest.raises(SystemExit):
        learner.ingest()
    learner.con.close()  # the process is gone: nothing else is written
    monkeypatch.undo()
    restarted = Replay(local_store, ReplaySettings(**SETTINGS, db_path=db, ingest_batch_shards=8))
    assert restarted.episodes == restarted.next_slot == 31  # 16 shards of 2 episodes, one broken
    report = restarted.ingest()
    assert report.shards == 14
    assert _contents(restarted)["episodes"] == _contents(reference)["episodes"]
    assert _contents(restarted)["blocks"] == _contents(reference)["blocks"]
    assert restarted.next_slot == reference.next_slot and restarted.size_steps == reference.size_steps
    restarted.close()
    reference.close()
