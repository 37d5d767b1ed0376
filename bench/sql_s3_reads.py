"""What `distrl sql` downloads from S3 against what its queries name, by read path, side by side
in one run, over shards with a screenshot per step and over the same episodes without:

- `duckdb_s3fs`: DuckDB reading the shards itself through the registered s3fs filesystem, footers
  checked through s3fs (`open_sql` without `RangedShards`: the read path of the ~98 % figure);
- `ranges_before`: pyarrow byte ranges as at commit fcc79ce: each footer from the shard's last 64 KiB,
  a scan's ranges merged across gaps of up to 8 KiB (pyarrow's default), a kept range reused only
  when it holds a whole read (its three settings restored in `_before`);
- `ranges_exact`: `storage.sql_sources` now: each footer's own bytes, column chunks exactly;
- `duckdb_httpfs` (with `--httpfs-python`): DuckDB 1.4.4's own httpfs over the same views, in a
  Python that has `duckdb==1.4.4` and `duckdb-ext-httpfs` (`bench/_sql_httpfs_child.py`).

Shards of 16 synthetic episodes whose steps carry real SimDroid screenshots (as `bench.capacity`'s
`images` part writes them) go into a counting moto S3 server. Each query runs as `distrl sql` runs
one: a fresh session (open: list, check the footers), the query, then the query again. Bytes are
counted at the server and set against the bytes of the column chunks the query's scans read (their
projections in DuckDB's plan, sized by each shard's footer) and of the footers.

    nice -n 10 .venv/bin/python -m bench.sql_s3_reads [--shards 50] [--rounds 2] [--httpfs-python PY]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import boto3
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from bench._capacity_images import real_screens, write_image_shards
from bench._common import machine, write_result
from bench.s3_counter import S3Counter, counting_s3
from storage.sql_sources import FOOTER_READ_BYTES, FooterGuess, RangeCache

# The views' common queries; `avg success` is the issue's example.
QUERIES = {
    "count steps": "SELECT count(*) FROM steps",
    "avg success": "SELECT avg(success) FROM episodes",
    "reward by family": "SELECT task_family, avg(reward) AS reward FROM steps GROUP BY task_family",
    "episodes by pool": "SELECT pool, count(*) AS episodes, avg(success) AS success FROM episodes GROUP BY ALL",
    "tasks": "SELECT * FROM tasks",
    "policies": "SELECT * FROM policies",
    "shards": "SELECT * FROM shards",
    "image bytes (names the image)": "SELECT sum(octet_length(screenshot_png)) AS image_bytes FROM steps",
}
READ_PATHS = ("duckdb_s3fs", "ranges_before", "ranges_exact")
BUCKET = "distrl-sql-reads"
_CHILD = Path(__file__).with_name("_sql_httpfs_child.py")


def _downloaded(counter: S3Counter, phase: str) -> tuple[int, int]:
    """(bytes downloaded, requests) in `phase`."""
    totals = counter.phase_totals(phase).values()
    return sum(t["bytes_out"] for t in totals), sum(t["requests"] for t in totals)


@contextmanager
def _before(read_path: str) -> Iterator[None]:
    """`open_sql` with the read path `read_path` names (see the module's docstring)."""
    import storage.sql_sources as sources
    import storage.sql_views as sql_views

    saved = sql_views.RangedShards, sources.SCAN_CACHE, sources.FooterGuess, sources.RangeCache
    if read_path == "duckdb_s3fs":
        sql_views.RangedShards = lambda *args: None  # type: ignore[assignment,misc]
    elif read_path == "ranges_before":
        sources.SCAN_CACHE = ds.ParquetFragmentScanOptions(pre_buffer=True).cache_options
        sources.FooterGuess = _LastKiBs  # type: ignore[misc]
        sources.RangeCache = _WholeRanges  # type: ignore[misc]
    try:
        yield
    finally:
        sql_views.RangedShards, sources.SCAN_CACHE, sources.FooterGuess, sources.RangeCache = saved  # type: ignore[misc]


class _LastKiBs(FooterGuess):
    """fcc79ce's footer fetch: the last 64 KiB of every shard (what pyarrow reads to find one)."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = FOOTER_READ_BYTES

    def saw(self, footer: int) -> None:
        pass


class _WholeRanges(RangeCache):
    """fcc79ce's cache: a read is served only from one kept range that holds all of it."""

    def prefix(self, path: str, start: int, end: int) -> bytes:
        piece = super().prefix(path, start, end)
        return piece if len(piece) == end - start else b""

    def next_start(self, path: str, start: int, end: int) -> int:
        return end


def _scanned_columns(plan: object) -> set[str]:
    """The columns that the scans in a DuckDB JSON plan read (their projections)."""
    found: set[str] = set()
    if isinstance(plan, dict):
        info = plan.get("extra_info")
        if "SCAN" in str(plan.get("name", "")) and isinstance(info, dict) and "Projections" in info:
            projections = info["Projections"]
            found.update([projections] if isinstance(projections, str) else projections)
        for value in plan.values():
            found |= _scanned_columns(value)
    elif isinstance(plan, list):
        for item in plan:
            found |= _scanned_columns(item)
    return found


def _shape(store_uri: str, counter: S3Counter) -> dict:
    """Each query's scanned columns and their chunks' bytes, and the footers' bytes (read off the
    count: phase `meta`)."""
    from storage.sql_views import open_sql
    from storage.store import open_store

    counter.phase = "meta"
    store = open_store(store_uri)
    metas = []
    for path in store.fs.find(store.trajectories):
        with store.fs.open(path, "rb") as fh:
            metas.append(pq.ParquetFile(fh).metadata)
    session = open_sql(store)
    try:
        columns = {}
        for name, statement in QUERIES.items():
            (row,) = session.con.execute(f"EXPLAIN (FORMAT json) {statement}").fetchall()
            columns[name] = sorted(_scanned_columns(json.loads(row[1])))
    finally:
        session.close()

    def chunk_bytes(names: list[str]) -> int:
        return sum(
            m.row_group(g).column(c).total_compressed_size
            for m in metas
            for g in range(m.num_row_groups)
            for c in range(m.num_columns)
            if m.row_group(g).column(c).path_in_schema in names
        )

    return {
        "shards": len(metas),
        "shard_bytes": sum(store.fs.size(p) for p in store.fs.find(store.trajectories)),
        "footer_bytes": sum(m.serialized_size + 8 for m in metas),
        "queries": {n: {"columns": c, "chunk_bytes": chunk_bytes(c)} for n, c in columns.items()},
    }


def _row(counter: S3Counter, phase: str, seconds: dict[str, float], shape: dict, query: str) -> dict:
    opened, open_requests = _downloaded(counter, f"{phase}:open")
    first, first_requests = _downloaded(counter, f"{phase}:first")
    again, _ = _downloaded(counter, f"{phase}:repeated")
    chunks = shape["queries"][query]["chunk_bytes"]
    return {
        "open_bytes": opened,
        "open_requests": open_requests,
        "open_over_footer_bytes": round(opened / shape["footer_bytes"], 3),
        "query_bytes": first,
        "query_requests": first_requests,
        "query_over_named_chunk_bytes": round(first / max(1, chunks), 3),
        "all_bytes_share_of_shards": round((opened + first) / shape["shard_bytes"], 4),
        "repeated_bytes": again,
        **{f"{k}_s": round(v, 3) for k, v in seconds.items()},
        "first_query_s": round(seconds["open"] + seconds["first"], 3),
    }


def measure(
    store_uri: str, counter: S3Counter, read_path: str, tag: str, shape: dict, queries: list[str]
) -> dict:
    from storage.sql_views import open_sql
    from storage.store import open_store

    rows = {}
    for query in queries:
        statement = QUERIES[query]
        phase, seconds = f"{tag}:{read_path}:{query}", dict[str, float]()
        counter.phase = f"{phase}:open"
        started = time.perf_counter()
        with _before(read_path):
            session = open_sql(open_store(store_uri))
        seconds["open"] = time.perf_counter() - started
        try:
            for run in ("first", "repeated"):
                counter.phase = f"{phase}:{run}"
                started = time.perf_counter()
                session.query(statement)
                seconds[run] = time.perf_counter() - started
        finally:
            session.close()
        rows[query] = _row(counter, phase, seconds, shape, query)
    return rows


def measure_httpfs(python: str, store_uri: str, counter: S3Counter, tag: str, shape: dict) -> dict:
    """The `duckdb_httpfs` read path, in `python` (`bench/_sql_httpfs_child.py`)."""
    from storage.sql_views import VIEWS_SQL
    from storage.store import open_store

    store = open_store(store_uri)
    spec = {
        "endpoint": os.environ["AWS_ENDPOINT_URL"],
        "urls": [store.url(p) for p in sorted(store.fs.find(store.trajectories))],
        "views_sql": VIEWS_SQL,
        "queries": list(QUERIES.values()),
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json") as spec_file:
        json.dump(spec, spec_file)
        spec_file.flush()
        child = subprocess.Popen(
            [python, str(_CHILD), spec_file.name], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert child.stdin is not None and child.stdout is not None
        rows = {}
        for query in QUERIES:
            phase, seconds = f"{tag}:duckdb_httpfs:{query}", dict[str, float]()
            for step in ("open", "first", "repeated"):
                assert child.stdout.readline().strip() == step
                counter.phase = f"{phase}:{step}"
                child.stdin.write("go\n")
                child.stdin.flush()
                seconds[step] = float(child.stdout.readline().split()[1])
            rows[query] = _row(counter, phase, seconds, shape, query)
        child.wait(timeout=60)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=50, help="shards of 16 episodes per store")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2, help="sessions per read path and query, alternating")
    parser.add_argument("--httpfs-python", help="a Python with duckdb==1.4.4 and duckdb-ext-httpfs")
    parser.add_argument("--paths", default=",".join(READ_PATHS), help="read paths, comma-separated")
    parser.add_argument("--queries", help="names of QUERIES to run, comma-separated (default: all)")
    parser.add_argument(
        "--paired", action="store_true", help="the read paths back to back per query (timing: less drift)"
    )
    parser.add_argument("--out", default="sql_s3_reads")
    args = parser.parse_args()
    if args.paired and args.httpfs_python:
        parser.error("--paired times the in-process read paths; leave out --httpfs-python")
    started = time.monotonic()
    paths = tuple(args.paths.split(",")) + (("duckdb_httpfs",) if args.httpfs_python else ())
    if args.queries:  # a timing run of a few queries: more rounds in the same minutes
        for name in set(QUERIES) - set(args.queries.split(",")):
            del QUERIES[name]
    with counting_s3() as (endpoint, counter):
        # moto accepts any key; these only keep the AWS chain from looking elsewhere
        os.environ.update(
            AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1"
        )
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=BUCKET)
        from storage.store import open_store

        screens = real_screens(64, args.seed)
        stores = {}
        for label, pictures in (("screenshots", screens), ("no_screenshots", [])):
            uri = f"s3://{BUCKET}/{label}"
            counter.phase = f"write:{label}"
            steps = write_image_shards(open_store(uri), args.shards, pictures, args.seed, f"sql{args.seed}")
            stores[label] = {"uri": uri, "steps": steps, **_shape(uri, counter)}
        runs = []
        for round_ in range(args.rounds):
            order = paths if round_ % 2 == 0 else paths[::-1]  # alternate: neither path always runs warm
            for label, store in stores.items():
                tag = f"{round_}:{label}"
                batches = [[q] for q in QUERIES] if args.paired else [list(QUERIES)]
                for batch, read_path in ((b, p) for b in batches for p in order):
                    if read_path == "duckdb_httpfs":
                        queries = measure_httpfs(args.httpfs_python, store["uri"], counter, tag, store)
                    else:
                        queries = measure(store["uri"], counter, read_path, tag, store, batch)
                    runs.append({"round": round_, "store": label, "read_path": read_path, "queries": queries})
    command = (
        f"nice -n 10 .venv/bin/python -m bench.sql_s3_reads --shards {args.shards} --seed {args.seed}"
        f" --rounds {args.rounds} --paths {args.paths}"
        + (f" --queries '{args.queries}'" if args.queries else "")
        + (" --paired" if args.paired else "")
        + (f" --out {args.out}" if args.out != "sql_s3_reads" else "")
    )
    document = {
        "benchmark": "sql_s3_reads",
        "command": command + (" --httpfs-python PY" if args.httpfs_python else ""),
        "machine": machine(),
        "screens": len(screens),
        "stores": {label: {k: v for k, v in s.items() if k != "uri"} for label, s in stores.items()},
        "runs": runs,
        "total_wall_s": round(time.monotonic() - started, 1),
    }
    path = write_result(args.out, document)
    print(json.dumps(document["stores"], indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
