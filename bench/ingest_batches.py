"""What a learner's replay pays to find and ingest shards: batched ingest and date-bounded listing.

Two measurements, written to bench/results/ingest_batches.json (docs/performance.md, "What breaks
first"):

- `ingest`: `Replay.ingest` of `--shards` shards of 16 synthetic episodes from a local folder, with
  `ingest_batch_shards` set to each of `--batches` (1 is one DuckDB transaction per shard, as before
  batching); shards per second and transactions.
- `discovery`: a moto S3 server that counts requests (`bench.s3_counter`) holding `--days` date
  partitions of `--per-day` shards; the LIST requests and listed keys of a replay's first scan
  (the whole history) and of its next scan (the recent partitions only).

    .venv/bin/python -m bench.ingest_batches [--shards 100] [--batches 1 16 64] [--days 30]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import numpy as np
import pyarrow.parquet as pq

from bench._common import machine, write_result
from bench.s3_counter import counting_s3


def measure_ingest(root: Path, shards: int, batch: int, seed: int) -> dict:
    from storage.replay import Replay
    from storage.replay_config import ReplaySettings
    from storage.store import open_store
    from storage.synthetic import write_synthetic_episodes

    store = open_store(str(root / f"ingest-{batch}"))
    write_synthetic_episodes(store, shards * 16, flush=16, collector=f"ingest{seed}", seed=seed)
    settings = ReplaySettings(min_size_steps=1, samples_per_insert=None, ingest_batch_shards=batch)
    replay = Replay(store, settings)
    started = time.perf_counter()
    report = replay.ingest()
    seconds = time.perf_counter() - started
    replay.close()
    return {
        "ingest_batch_shards": batch,
        "shards": report.shards,
        "transactions": report.transactions,
        "steps": report.steps,
        "seconds": round(seconds, 2),
        "shards_per_s": round(report.shards / seconds, 1),
        "ms_per_shard": round(1000 * seconds / report.shards, 1),
    }


def measure_discovery(days: int, per_day: int) -> dict:
    from storage.replay import Replay
    from storage.replay_config import ReplaySettings
    from storage.shards import shard_dir
    from storage.store import atomic_put, open_store
    from storage.synthetic import synthetic_episode

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    sink = io.BytesIO()
    pq.write_table(synthetic_episode(np.random.default_rng(0)), sink)
    today = datetime.now(UTC).date()
    with counting_s3() as (endpoint, counter):
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="discovery")
        store = open_store("s3://discovery/run", endpoint_url=endpoint)
        for back in range(days):
            folder = shard_dir(store, "bench", (today - timedelta(days=back)).isoformat())
            for i in range(per_day):
                atomic_put(store, f"{folder}/c{back}-{i:06d}-x.parquet", sink.getvalue())
        replay = Replay(store, ReplaySettings(min_size_steps=1, samples_per_insert=None))
        scans = {}
        for phase in ("first_scan", "next_scan"):
            counter.phase = phase
            started = time.perf_counter()
            replay.catalog.scan()
            lists = counter.phase_totals(phase).get("LIST", {"requests": 0, "keys": 0})
            scans[phase] = {
                "list_requests": lists["requests"],
                "listed_keys": lists["keys"],
                "seconds": round(time.perf_counter() - started, 3),
            }
        replay.close()
    return {"days": days, "shards_per_day": per_day, "shards": days * per_day, **scans}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=100, help="shards of 16 episodes to ingest")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--repeats", type=int, default=2, help="ingest runs per batch size, interleaved")
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--per-day", type=int, default=40)
    parser.add_argument("--root", default=".distrl/bench/ingest_batches")
    args = parser.parse_args()
    root = Path(args.root).resolve()
    shutil.rmtree(root, ignore_errors=True)  # no Prefect or torch here: `_common.prepare` is not needed
    ingest = []
    for repeat in range(args.repeats):  # interleaved: a loaded machine's drift hits every size alike
        for batch in args.batches:
            ingest.append(measure_ingest(root / f"r{repeat}", args.shards, batch, seed=repeat))
            print(json.dumps(ingest[-1]), flush=True)
    discovery = measure_discovery(args.days, args.per_day)
    print(json.dumps(discovery), flush=True)
    document = {
        "benchmark": "ingest_batches",
        "settings": vars(args),
        "machine": machine(),
        "ingest": ingest,
        "discovery": discovery,
    }
    print(f"wrote {write_result('ingest_batches', document)}")


if __name__ == "__main__":
    main()
