"""`bench.capacity`'s learner-side measurements: `Replay.ingest` over collector-sized shards (from a
local folder, or from the counted S3 bucket with requests per shard), and sample and priority
write-back latency at replay sizes of synthetic data."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.s3_counter import S3Counter


def measure_ingest(store_uri: str, shards: int, counter: S3Counter | None, seed: int) -> dict:
    from storage.replay import Replay
    from storage.replay_config import ReplaySettings
    from storage.store import open_store
    from storage.synthetic import write_synthetic_episodes

    store = open_store(store_uri)
    if counter is not None:
        counter.phase = "ingest_write"
    write_synthetic_episodes(store, shards * 16, flush=16, collector=f"ingest{seed}", seed=seed)
    if counter is not None:
        counter.phase = "ingest"
    replay = Replay(store, ReplaySettings(min_size_steps=1, samples_per_insert=None))
    started = time.perf_counter()
    report = replay.ingest()
    seconds = time.perf_counter() - started
    replay.close()
    result: dict[str, Any] = {
        "store": "s3 (moto)" if counter is not None else "local folder",
        "shards": report.shards,
        "episodes": report.episodes,
        "steps": report.steps,
        "seconds": round(seconds, 2),
        "steps_per_s": round(report.steps / seconds),
        "shards_per_s": round(report.shards / seconds, 1),
    }
    if counter is not None:
        s3 = counter.phase_totals("ingest")
        result["s3_per_shard"] = {k: round(t["requests"] / max(1, report.shards), 2) for k, t in s3.items()}
    return result


def replay_latency(store: Any, size: int, reps: int, rng: np.random.Generator) -> dict:
    from bench.replay_sampling import timed
    from storage.replay import Replay
    from storage.replay_config import ReplaySettings

    replay = Replay(store, ReplaySettings(capacity_steps=size, min_size_steps=1, samples_per_insert=None))
    started = time.perf_counter()
    report = replay.ingest()
    ingest_s = time.perf_counter() - started

    def write_back() -> None:
        slots = rng.choice(replay.next_slot, 256, replace=False)
        replay.update_priorities(slots, rng.random(256) + 0.01)

    try:
        return {
            "steps": report.steps,
            "trajectories": report.episodes,
            "bulk_ingest_steps_per_s": round(report.steps / ingest_s),
            "sample_16": timed(lambda: replay.sample(16), reps),
            "sample_256": timed(lambda: replay.sample(256), reps),
            "write_back_256": timed(write_back, reps),
        }
    finally:
        replay.close()


def measure_replay(sizes: list[int], reps: int, workdir: Path, seed: int) -> list[dict]:
    import pyarrow.parquet as pq

    from storage.store import open_store
    from storage.synthetic import synthetic_bulk

    rng = np.random.default_rng(seed)
    results = []
    for size in sizes:
        store = open_store(str(workdir / f"replay_{size}"))
        episodes = size // 10
        for i, start in enumerate(range(0, episodes, 50_000)):
            path = Path(store.trajectories) / "pool=bench" / "date=2026-11-01" / f"bulk-{i:06d}-x.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(synthetic_bulk(rng, min(50_000, episodes - start)), path)
        results.append(replay_latency(store, size, reps, rng))
        print(json.dumps(results[-1]), flush=True)
    return results
