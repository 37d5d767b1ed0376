"""`bench.scaling`'s learner side, over the shards its collectors just wrote (screenshots in them):
ingest rate, the replay's memory once they are in, and the learner's sampled steps per second
(replay sample + `Learner.update` + priority write-back, the loop of `tasks.learner.train_block`
without its prefetch thread), with the replay keeping screenshots and without them.

Measured one after the other, after the collectors stopped: on 2 shared cores a learner measured
while collectors act would measure the collectors too."""

from __future__ import annotations

import gc
import time
from pathlib import Path
from typing import Any


def rss_bytes() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def duckdb_memory(con: Any) -> int:
    """Bytes DuckDB holds in its buffer manager (tables, indexes, caches) on this connection."""
    return int(
        con.execute("SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory()").fetchall()[0][0]
    )


def measure_learner(
    store_uri: str, policy_path: Path, seconds: float, keep_screenshots: bool, seed: int
) -> dict:
    """One replay over the store (keeping screenshots or not) and the learner training from it."""
    from distrl_core.learner import Learner, LearnerConfig
    from distrl_core.learner.learner import Draw, train_step
    from distrl_core.policy import load_policy
    from storage.replay import Replay
    from storage.replay_config import ReplaySettings
    from storage.store import open_store

    gc.collect()
    rss0 = rss_bytes()
    settings = ReplaySettings(
        min_size_steps=1,
        samples_per_insert=None,
        keep_screenshots=keep_screenshots,
        capacity_steps=10_000_000,
    )
    replay = Replay(open_store(store_uri), settings)
    started = time.perf_counter()
    report = replay.ingest()
    ingest_s = time.perf_counter() - started
    gc.collect()
    memory = {"rss_delta_bytes": rss_bytes() - rss0, "duckdb_bytes": duckdb_memory(replay.con)}
    learner = Learner(load_policy(policy_path), LearnerConfig(seed=seed))
    sample_s = update_s = 0.0
    updates = steps = 0

    def draw() -> Draw:
        nonlocal sample_s
        t = time.perf_counter()
        batch = replay.sample(16, beta=learner.beta_at(), seed=seed + updates)
        sample_s += time.perf_counter() - t
        return Draw(batch.slots, batch.steps, batch.is_weights)

    try:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            step = train_step(learner, draw, replay.update_priorities)
            update_s += step.update_s
            updates += 1
            steps += step.steps
        wall = time.perf_counter() - t0
    finally:
        replay.close()
    return {
        "keep_screenshots": keep_screenshots,
        "ingest": {
            "shards": report.shards,
            "steps": report.steps,
            "seconds": round(ingest_s, 2),
            "steps_per_s": round(report.steps / max(ingest_s, 1e-9), 1),
            "shards_per_s": round(report.shards / max(ingest_s, 1e-9), 2),
        },
        "replay_memory": memory | {"bytes_per_step": round(memory["duckdb_bytes"] / max(1, report.steps))},
        "learner": {
            "batch_trajectories": 16,
            "seconds": round(wall, 1),
            "updates": updates,
            "sampled_steps": steps,
            "sampled_steps_per_s": round(steps / wall, 1),
            "updates_per_s": round(updates / wall, 2),
            "sample_ms_per_update": round(1000 * sample_s / max(1, updates), 1),
            "update_ms_per_update": round(1000 * update_s / max(1, updates), 1),
        },
    }


def shard_bytes(store_uri: str) -> dict:
    """Bytes per step of every shard in the store, and the screenshot column's share of them."""
    import pyarrow.parquet as pq

    from storage.catalog import list_shards
    from storage.schema import IMAGE_COLUMN
    from storage.store import open_store

    store = open_store(store_uri)
    files = rows = image = 0
    for shard in list_shards(store):
        with store.fs.open(shard.path, "rb") as fh:
            meta = pq.ParquetFile(fh).metadata
        files += store.fs.size(shard.path)
        rows += meta.num_rows
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            for c in range(group.num_columns):
                if group.column(c).path_in_schema == IMAGE_COLUMN:
                    image += group.column(c).total_compressed_size
    return {
        "steps": rows,
        "file_bytes": files,
        "bytes_per_step": round(files / max(1, rows), 1),
        "image_column_share": round(image / max(1, files), 4),
    }
