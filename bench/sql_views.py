"""SQL-over-shards benchmark: `SELECT family, avg(success) FROM episodes GROUP BY 1` over 1M steps.

Runs against a local folder and against S3 served by a moto server on loopback, and prints JSON
(also written to bench/results/sql_views.json): the time to open the views (list + footer checks)
and p50/p95 of the query.

    .venv/bin/python -m bench.sql_views [--steps 1000000] [--reps 10]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import tempfile
import time
from pathlib import Path

import numpy as np

from storage.sql_views import open_sql
from storage.store import Store, atomic_put, open_store
from storage.synthetic import synthetic_bulk

QUERY = "SELECT family, avg(success) FROM episodes GROUP BY 1"


def _write(store: Store, steps: int, shards: int) -> None:
    import io

    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    for i in range(shards):
        sink = io.BytesIO()
        pq.write_table(synthetic_bulk(rng, steps // shards // 10), sink)
        path = store.path("trajectories", "pool=bench", "date=2026-11-01", f"bench-{i:06d}-x.parquet")
        atomic_put(store, path, sink.getvalue())


def _measure(store: Store, reps: int) -> dict:
    started = time.perf_counter()
    session = open_sql(store)
    open_s = time.perf_counter() - started
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        session.query(QUERY)
        times.append(time.perf_counter() - t)
    n = session.query("SELECT count(*) AS n FROM steps").column(0)[0].as_py()
    session.close()
    ms = np.array(times) * 1000
    return {
        "steps": n,
        "open_views_s": round(open_s, 3),
        "query_p50_ms": round(float(np.median(ms)), 1),
        "query_p95_ms": round(float(np.percentile(ms, 95)), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--shards", type=int, default=20)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--out", default="bench/results/sql_views.json")
    args = parser.parse_args()
    out: dict = {"query": QUERY}
    with tempfile.TemporaryDirectory() as tmp:
        local = open_store(str(Path(tmp) / "store"))
        _write(local, args.steps, args.shards)
        out["local"] = _measure(local, args.reps)

    import logging

    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        os.environ.update(
            AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1"
        )
        endpoint = f"http://127.0.0.1:{port}"
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench-store")
        s3 = open_store("s3://bench-store/run", endpoint_url=endpoint)
        _write(s3, args.steps, args.shards)
        out["s3_moto"] = _measure(s3, args.reps)
    finally:
        server.stop()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
