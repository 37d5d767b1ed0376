"""`bench.capacity`'s `images` part: trajectories at their real size, a PNG per step.

Shards of 16 episodes whose steps carry real SimDroid screenshots (rendered here, at the
collectors' default quarter scale) go into the counted S3 bucket; then
- ingest: `Replay.ingest` from S3 keeping screenshots and not (`ReplaySettings.keep_screenshots`):
  steps/s, bytes downloaded per step (the replay that drops them never reads their column), and the
  replay's memory afterwards (DuckDB's buffer manager, and the process's RSS growth);
- SQL: `distrl sql`'s views over those shards, bytes downloaded per query, for queries that do not
  ask for the image column and one that does.
"""

from __future__ import annotations

import gc
import time
from typing import Any

import numpy as np
import pyarrow as pa

from bench._scaling_learner import duckdb_memory, rss_bytes
from bench.s3_counter import S3Counter

SQL_QUERIES = {
    "count steps": "SELECT count(*) FROM steps",
    "episodes by pool": "SELECT pool, count(*) AS episodes, avg(success) AS success FROM episodes GROUP BY ALL",
    "policies": "SELECT * FROM policies",
    "shards": "SELECT * FROM shards",
    "image bytes (asks for the image)": "SELECT sum(octet_length(screenshot_png)) AS image_bytes FROM steps",
}


def real_screens(count: int, seed: int) -> list[bytes]:
    """Distinct PNG screens of SimDroid at the collectors' settings, from random walks over tasks."""
    from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
    from simulators.simdroid.tasks import load_tasks

    rng = np.random.default_rng(seed)
    env = SimDroidEnv(SimDroidEnvConfig(screenshots=True, ui_xml=False, seed=seed))
    tasks = load_tasks("general", "train")
    screens: dict[bytes, None] = {}
    while len(screens) < count:
        task = tasks[int(rng.integers(len(tasks)))]
        observation = env.reset(task.task_id, seed=int(rng.integers(1 << 30)))
        for _ in range(6):
            if observation.screenshot_png:
                screens[observation.screenshot_png] = None
            elements = list(observation.elements) if hasattr(observation, "elements") else []
            action = f"tap({int(rng.integers(max(1, len(elements))))})"
            result = env.step(action)
            observation = result.observation
            if result.done:
                break
    return list(screens)[:count]


def write_image_shards(store: Any, shards: int, screens: list[bytes], seed: int, collector: str) -> int:
    """`shards` shards of 16 synthetic episodes, each step with one of `screens` (none if empty);
    returns the steps written."""
    from storage.shards import ShardWriter, ShardWriterConfig
    from storage.synthetic import synthetic_episode

    rng, pick_rng = np.random.default_rng(seed), np.random.default_rng(seed + 1)  # episodes alike either way
    config = ShardWriterConfig(pool="pool_a", collector_id=collector, flush_episodes=16, flush_seconds=0)
    steps = 0
    with ShardWriter(store, config) as writer:
        for _ in range(shards * 16):
            episode = synthetic_episode(rng)
            if screens:  # otherwise the same episodes without images, for the comparison
                picks = [screens[int(i)] for i in pick_rng.integers(len(screens), size=episode.num_rows)]
                index = episode.schema.get_field_index("screenshot_png")
                episode = episode.set_column(index, "screenshot_png", pa.array(picks, pa.binary()))
            writer.add_episode(episode)
            steps += episode.num_rows
    return steps


def _downloaded(counter: S3Counter, phase: str) -> int:
    return sum(t["bytes_out"] for t in counter.phase_totals(phase).values())


def measure_image_ingest(store_uri: str, counter: S3Counter, keep: bool) -> dict:
    from storage.replay import Replay
    from storage.replay_config import ReplaySettings
    from storage.store import open_store

    gc.collect()
    rss0 = rss_bytes()
    phase = f"images_ingest_keep_{keep}"
    counter.phase = phase
    settings = ReplaySettings(
        min_size_steps=1, samples_per_insert=None, keep_screenshots=keep, capacity_steps=10_000_000
    )
    replay = Replay(open_store(store_uri), settings)
    started = time.perf_counter()
    report = replay.ingest()
    seconds = time.perf_counter() - started
    gc.collect()
    try:
        memory = duckdb_memory(replay.con)
    finally:
        replay.close()
    downloaded = _downloaded(counter, phase)
    return {
        "keep_screenshots": keep,
        "shards": report.shards,
        "steps": report.steps,
        "seconds": round(seconds, 2),
        "steps_per_s": round(report.steps / seconds, 1),
        "shards_per_s": round(report.shards / seconds, 2),
        "s3_bytes_downloaded": downloaded,
        "s3_bytes_downloaded_per_step": round(downloaded / max(1, report.steps)),
        "replay_duckdb_bytes": memory,
        "replay_duckdb_bytes_per_step": round(memory / max(1, report.steps)),
        "rss_growth_bytes": rss_bytes() - rss0,
    }


def measure_sql_reads(store_uri: str, counter: S3Counter) -> dict:
    """Bytes each `distrl sql` query downloads from S3, against the shards' total."""
    from storage.sql_views import open_sql
    from storage.store import open_store

    store = open_store(store_uri)
    counter.phase = "images_sql_open"
    session = open_sql(store)
    total = sum(store.fs.size(p) for p in session.shards)
    results = {}
    try:
        for name, statement in SQL_QUERIES.items():
            counter.phase = f"images_sql:{name}"
            started = time.perf_counter()
            session.query(statement)
            seconds = time.perf_counter() - started
            downloaded = _downloaded(counter, counter.phase)
            results[name] = {
                "sql": statement,
                "bytes_downloaded": downloaded,
                "share_of_shard_bytes": round(downloaded / max(1, total), 4),
                "seconds": round(seconds, 2),
            }
    finally:
        session.close()
    return {"shards": len(session.shards), "shard_bytes": total, "queries": results}


def measure_images(bucket: str, counter: S3Counter, shards: int, seed: int) -> dict:
    from storage.store import open_store

    screens = real_screens(64, seed)
    store_uri = f"s3://{bucket}/images"
    counter.phase = "images_write"
    steps = write_image_shards(open_store(store_uri), shards, screens, seed, collector=f"images{seed}")
    uploaded = sum(t["bytes_in"] for t in counter.phase_totals("images_write").values())
    counter.phase = "images_write_none"  # the same episodes (same seed), no screenshots
    write_image_shards(open_store(f"s3://{bucket}/no-images"), shards, [], seed, collector=f"images{seed}")
    plain = sum(t["bytes_in"] for t in counter.phase_totals("images_write_none").values())
    return {
        "screen_png_bytes": {
            "p50": int(np.median([len(s) for s in screens])),
            "mean": round(float(np.mean([len(s) for s in screens]))),
            "distinct_screens": len(screens),
        },
        "shards": shards,
        "steps": steps,
        "shard_bytes_per_step": round(uploaded / max(1, steps)),
        "shard_bytes_per_step_without_screenshots": round(plain / max(1, steps)),
        "ingest": [measure_image_ingest(store_uri, counter, keep) for keep in (False, True)],
        "sql": measure_sql_reads(store_uri, counter),
    }
