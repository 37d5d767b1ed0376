"""Prioritized-replay benchmark: the DuckDB three-stage sampler vs a full-scan query vs a numpy sum-tree.

Two views, both printed as one JSON document (and written to bench/results/replay_sampling.json):
- `sampler`: sampling units = transitions. N rows of priorities (100k, 1M, 10M); latency of drawing
  256 (p50/p95) and of writing back 256 priorities, for the replay's exact SQL, the naive full-scan
  `ORDER BY -ln(1-random())/w LIMIT 256` and an in-memory sum-tree (the reference limit).
- `replay`: the real `Replay` at trajectory level (episodes of 10 steps, so N transitions are N/10
  trajectories): ingest from Parquet shards, `sample(256)` including fetching the step rows (whole
  trajectories and windows of 4), `update_priorities(256)`.

    .venv/bin/python -m bench.replay_sampling [--sizes 100000 1000000 10000000] [--reps 30]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.sumtree import SumTree
from storage import replay_sql as sql
from storage.replay import Replay
from storage.replay_config import ReplaySettings
from storage.store import open_store
from storage.synthetic import synthetic_bulk

BATCH = 256


def stats(samples: list[float]) -> dict[str, float]:
    ms = np.array(samples) * 1000
    return {"p50_ms": round(float(np.median(ms)), 2), "p95_ms": round(float(np.percentile(ms, 95)), 2)}


def timed(fn, reps: int) -> dict[str, float]:
    fn()  # warm-up
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return stats(out)


def bench_sampler(n: int, reps: int, block: int, sup: int, rng: np.random.Generator) -> dict:
    con = duckdb.connect(":memory:", config={"threads": 2})
    con.execute(sql.CREATE_TABLES)
    started = time.perf_counter()
    con.execute(
        "CREATE TEMP TABLE new_items AS SELECT i::BIGINT AS slot, 0.01 + random() AS priority, "
        "1::BIGINT AS policy_version FROM range($n) t(i)",
        {"n": n},
    )
    params = {"B": block, "S": sup, "alpha": 0.6, "version_cutoff": -1, "first_slot": 0}
    sql.run_script(con, sql.INSERT_ITEMS, params)
    sql.run_script(con, sql.REBUILD_ALL_SUPERS)
    sql.prepare(con, fetch=False)
    build_s = time.perf_counter() - started
    con.execute("CREATE TABLE flat_items AS SELECT slot, pow(priority, 0.6) AS w FROM new_items")
    con.execute("DROP TABLE new_items")

    def update() -> None:
        slots = rng.choice(n, BATCH, replace=False)
        con.register("updates", pa.table({"slot": slots, "priority": rng.random(BATCH) + 0.01}))
        sql.run_script(con, sql.UPDATE_PRIORITIES, params)

    weights = con.execute("SELECT w FROM flat_items ORDER BY slot").fetchnumpy()["w"]
    tree = SumTree(weights)
    result = {
        "n": n,
        "build_s": round(build_s, 2),
        "duckdb_three_stage": timed(
            lambda: sql.sample_slots(con, rng, BATCH, super_size=sup, block_size=block), reps
        ),
        "duckdb_full_scan": timed(
            lambda: sql.query(con, sql.SAMPLE_FULL_SCAN, {"n": BATCH}).fetchall(), reps
        ),
        "numpy_sum_tree": timed(lambda: tree.sample(BATCH, rng), reps),
        "update_256_duckdb": timed(update, reps),
        "update_256_sum_tree": timed(
            lambda: tree.update(rng.choice(n, BATCH, replace=False), rng.random(BATCH)), reps
        ),
    }
    con.close()
    return result


def bench_replay(transitions: int, reps: int, rng: np.random.Generator, workdir: Path) -> dict:
    store = open_store(str(workdir / f"store_{transitions}"))
    episodes = transitions // 10
    chunk = 100_000  # episodes per shard
    for i, start in enumerate(range(0, episodes, chunk)):
        table = synthetic_bulk(rng, min(chunk, episodes - start))
        path = Path(store.trajectories) / "pool=bench" / "date=2026-11-01" / f"bench-{i:06d}-x.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)
    config = ReplaySettings(capacity_steps=transitions, min_size_steps=1, samples_per_insert=None)
    replay = Replay(store, config)
    started = time.perf_counter()
    report = replay.ingest()
    ingest_s = time.perf_counter() - started

    def update() -> None:
        replay.update_priorities(rng.choice(replay.next_slot, BATCH, replace=False), rng.random(BATCH) + 0.01)

    result = {
        "transitions": transitions,
        "trajectories": report.episodes,
        "ingest_s": round(ingest_s, 2),
        "ingest_steps_per_s": round(report.steps / ingest_s),
        "sample_256_trajectories_with_steps": timed(lambda: replay.sample(BATCH), reps),
        "sample_256_windows_of_4": timed(lambda: replay.sample(BATCH, window=4), reps),
        "update_256": timed(update, reps),
    }
    replay.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 10_000_000])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--block-size", type=int, default=ReplaySettings().block_size)
    parser.add_argument("--super-size", type=int, default=ReplaySettings().super_size)
    parser.add_argument("--skip-replay", action="store_true", help="only the sampler comparison")
    parser.add_argument("--out", default="bench/results/replay_sampling.json")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    out: dict = {"batch": BATCH, "machine": "2 CPU cores, DuckDB threads=2", "sampler": [], "replay": []}
    for n in args.sizes:
        out["sampler"].append(bench_sampler(n, args.reps, args.block_size, args.super_size, rng))
        print(json.dumps(out["sampler"][-1]), file=sys.stderr)
    if not args.skip_replay:
        with tempfile.TemporaryDirectory() as tmp:
            for n in args.sizes:
                out["replay"].append(bench_replay(n, args.reps, rng, Path(tmp)))
                print(json.dumps(out["replay"][-1]), file=sys.stderr)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
