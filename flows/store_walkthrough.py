"""A short walk through the trajectory store, used by `make demo` until the full training run lands.

What it really does: several collector threads write synthetic episodes (schema-valid, shaped like
SimDroid output, but not produced by a policy) as Parquet shards; a replay ingests them, samples
trajectories by priority, writes priorities back and persists them; then SQL views answer a few
questions. No model is trained here.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import numpy as np

from storage.replay import Replay
from storage.replay_config import ReplaySettings
from storage.shards import ShardWriter, ShardWriterConfig
from storage.sql_output import format_table
from storage.sql_views import open_sql
from storage.store import open_store
from storage.synthetic import synthetic_episode

QUERIES = {
    "success by family": "SELECT family, count(*) AS episodes, round(avg(success), 3) AS success_rate "
    "FROM episodes GROUP BY 1 ORDER BY 1",
    "steps per policy version": "SELECT policy_version, steps, episodes FROM policies ORDER BY 1",
    "episodes per pool": "SELECT pool, count(*) AS episodes, round(avg(length), 2) AS mean_length "
    "FROM episodes GROUP BY 1 ORDER BY 1",
}


def _collector(store_uri: str, index: int, episodes: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    store = open_store(store_uri)
    pool = f"pool_{'ab'[index % 2]}"
    config = ShardWriterConfig(pool=pool, collector_id=f"c{index}", flush_episodes=25, flush_seconds=5)
    with ShardWriter(store, config) as writer:
        for i in range(episodes):
            writer.add_episode(
                synthetic_episode(
                    rng, pool=pool, collector_id=f"c{index}", policy_version=1 + 3 * i // episodes
                )
            )


def run_walkthrough(store_uri: str | None = None, collectors: int = 4, episodes: int = 200) -> dict:
    store_uri = store_uri or ".distrl/walkthrough"
    store = open_store(store_uri)
    if store.is_local and Path(store.root).name == "walkthrough":
        shutil.rmtree(store.root, ignore_errors=True)  # the walk-through owns this folder; start clean
    print(f"1. {collectors} collector threads write {episodes} synthetic episodes each to {store.uri} ...")
    started = time.perf_counter()
    threads = [
        threading.Thread(target=_collector, args=(store_uri, i, episodes, i)) for i in range(collectors)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    write_s = time.perf_counter() - started

    print("2. the replay ingests every new shard, then samples 64 trajectories by priority ...")
    replay = Replay(store, ReplaySettings(min_size_steps=100, samples_per_insert=None))
    report = replay.ingest()
    rng = np.random.default_rng(0)
    for update in range(20):
        batch = replay.sample(64, beta=replay.config.beta_at(update))
        # Stand-in for the loss: favour long trajectories, so sampling visibly follows priority.
        lengths = batch.steps.group_by("sample_idx").aggregate([("step", "count")])
        replay.update_priorities(
            batch.slots, lengths.column("step_count").to_numpy() + rng.random(batch.size)
        )
    final = replay.sample(256, beta=1.0)
    snapshot = replay.checkpoint()
    mean_len_sampled = final.steps.num_rows / final.size
    replay.close()

    print("3. SQL over the shards:")
    session = open_sql(store)
    for title, query in QUERIES.items():
        print(f"\n-- {title}\n{query}\n{format_table(session.query(query))}")
    mean_len_all = session.query("SELECT avg(length) FROM episodes").column(0)[0].as_py()
    session.close()
    print(
        f"\nShards: {store.url(store.trajectories)}\nPriorities: {store.url(snapshot)}\n"
        f'Query it yourself: distrl sql --store {store.uri} "SELECT * FROM episodes LIMIT 5"'
    )
    return {
        "what_ran": "store walk-through on synthetic episodes (no policy training yet)",
        "collectors": collectors,
        "shards": report.shards,
        "episodes_ingested": report.episodes,
        "steps_ingested": report.steps,
        "write_seconds": round(write_s, 2),
        "mean_length_all_episodes": round(mean_len_all, 2),
        "mean_length_after_prioritising_long_ones": round(mean_len_sampled, 2),
    }
