"""What `distrl sql` downloads from S3 over screenshot-bearing shards, and how long it takes, by
read path, side by side in one run:

- `duckdb_s3fs`: DuckDB reading the shards itself through the registered s3fs filesystem, footers
  checked through s3fs (how `distrl sql` read S3 before: `open_sql` without `RangedShards`);
- `pyarrow_ranges`: the views over a pyarrow dataset of byte ranges (`storage.sql_sources`, now).

Shards of 16 synthetic episodes whose steps carry real SimDroid screenshots (as `bench.capacity`'s
`images` part writes them) go into a counting moto S3 server; each query runs twice in one session
(first and repeated), and the bytes each run downloaded are counted at the server.

    nice -n 10 .venv/bin/python -m bench.sql_s3_reads [--shards 50] [--seed 3] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import boto3

from bench._capacity_images import real_screens, write_image_shards
from bench._common import machine, write_result
from bench.s3_counter import S3Counter, counting_s3

QUERIES = {
    "count steps": "SELECT count(*) FROM steps",
    "reward by family": "SELECT task_family, avg(reward) AS reward FROM steps GROUP BY task_family",
    "episodes by pool": "SELECT pool, count(*) AS episodes, avg(success) AS success FROM episodes GROUP BY ALL",
    "shards": "SELECT * FROM shards",
    "image bytes (asks for the image)": "SELECT sum(octet_length(screenshot_png)) AS image_bytes FROM steps",
}
READ_PATHS = ("duckdb_s3fs", "pyarrow_ranges")
BUCKET = "distrl-sql-reads"


def _downloaded(counter: S3Counter, phase: str) -> int:
    return sum(t["bytes_out"] for t in counter.phase_totals(phase).values())


@contextmanager
def _duckdb_reads_s3() -> Iterator[None]:
    """`open_sql` as it was before pyarrow read S3 for it: no `RangedShards`, so the footers are
    checked through s3fs and the views are DuckDB's own Parquet scan over the registered s3fs."""
    import storage.sql_views as sql_views

    ranged = sql_views.RangedShards
    sql_views.RangedShards = lambda *args: None  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        sql_views.RangedShards = ranged  # type: ignore[misc]


def measure(store_uri: str, counter: S3Counter, read_path: str, round_: int) -> dict:
    from storage.sql_views import open_sql
    from storage.store import open_store

    store = open_store(store_uri)
    phase = f"{round_}:{read_path}"
    counter.phase = f"{phase}:open"
    started = time.perf_counter()
    with _duckdb_reads_s3() if read_path == "duckdb_s3fs" else nullcontext():
        session = open_sql(store)
    open_s = time.perf_counter() - started
    total = sum(store.fs.size(p) for p in session.shards)
    queries: dict[str, dict] = {}
    try:
        for name, statement in QUERIES.items():
            runs = []
            for run in ("first", "repeated"):
                counter.phase = f"{phase}:{name}:{run}"
                started = time.perf_counter()
                rows = session.query(statement).num_rows
                seconds = time.perf_counter() - started
                downloaded = _downloaded(counter, counter.phase)
                runs.append(
                    {
                        "run": run,
                        "rows": rows,
                        "seconds": round(seconds, 3),
                        "bytes_downloaded": downloaded,
                        "share_of_shard_bytes": round(downloaded / max(1, total), 4),
                    }
                )
            queries[name] = {"sql": statement, "runs": runs}
    finally:
        session.close()
    return {
        "read_path": read_path,
        "shards": len(session.shards),
        "shard_bytes": total,
        "open_seconds": round(open_s, 3),
        "open_bytes_downloaded": _downloaded(counter, f"{phase}:open"),
        "queries": queries,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=50, help="screenshot-bearing shards of 16 episodes")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2, help="sessions per read path, alternating")
    parser.add_argument("--out", default="sql_s3_reads")
    args = parser.parse_args()
    started = time.monotonic()
    with counting_s3() as (endpoint, counter):
        # moto accepts any key; these only keep the AWS chain from looking elsewhere
        os.environ.update(
            AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1"
        )
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=BUCKET)
        from storage.store import open_store

        store_uri = f"s3://{BUCKET}/images"
        screens = real_screens(64, args.seed)
        counter.phase = "write"
        steps = write_image_shards(open_store(store_uri), args.shards, screens, args.seed, f"sql{args.seed}")
        results = [
            {"round": r, **measure(store_uri, counter, read_path, r)}
            for r in range(args.rounds)
            for read_path in READ_PATHS
        ]
    document = {
        "benchmark": "sql_s3_reads",
        "command": f"nice -n 10 .venv/bin/python -m bench.sql_s3_reads --shards {args.shards} --seed {args.seed} --rounds {args.rounds}",
        "machine": machine(),
        "steps": steps,
        "screens": len(screens),
        "read_paths": results,
        "total_wall_s": round(time.monotonic() - started, 1),
    }
    path = write_result(args.out, document)
    print(json.dumps(document, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
