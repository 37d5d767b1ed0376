"""The fault injectors of the outside probe, shared by tests/reliability (small counts) and
bench/faults.py (large counts):

- `bad_shards`: one bad shard of every kind found: unreadable, cut short, foreign, from the
  future, and with a valid footer over corrupted data pages (which only a full read notices);
- `SQL_ATTACKS` / `SQL_ALLOWED`: what `distrl sql` must refuse, and the legitimate look-alikes;
- `kill_writer_loop`: a shard writer in a child process, killed with SIGKILL mid-run, again and
  again; then what is visible in the store is checked (run `python -m bench.probes
  writer STORE_URI ACK_FILE KB` for the child itself).
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from storage.catalog import list_shards, try_read_shard
from storage.schema import SCHEMA_VERSION_KEY
from storage.shards import ShardWriter, ShardWriterConfig
from storage.store import Store, open_store, sweep_stale_temps
from storage.synthetic import synthetic_episode


def _parquet(table: pa.Table, **kwargs) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **kwargs)
    return sink.getvalue()


def _damage_pages(payload: bytes, how: str) -> bytes:
    """Damage everything between the leading magic and the footer; the footer stays valid."""
    footer_len = int.from_bytes(payload[-8:-4], "little")
    data = bytearray(payload)
    for i in range(4, len(data) - 8 - footer_len):
        data[i] = 0 if how == "zero" else data[i] ^ 0x5A
    return bytes(data)


def bad_shards(store: Store, day: str = "2026-11-01") -> dict[str, bytes]:
    """Path -> payload of one bad shard per kind, under `trajectories/pool=pool_a/date=<day>/`."""
    episode = synthetic_episode(np.random.default_rng(9), n_steps=20)
    good = _parquet(episode, compression="zstd")
    base = store.path("trajectories", "pool=pool_a", f"date={day}")
    kinds = {
        "garbage": b"not a parquet file at all",
        "empty": b"",
        "half": good[: len(good) // 2],
        "foreign": _parquet(pa.table({"x": [1, 2, 3]})),
        "renamed": _parquet(pa.table({"x": [1]}).replace_schema_metadata({SCHEMA_VERSION_KEY: b"1.0"})),
        "future": _parquet(episode.replace_schema_metadata({SCHEMA_VERSION_KEY: b"2.0"})),
        "flipped_pages": _damage_pages(good, "flip"),
        "zeroed_pages": _damage_pages(good, "zero"),
        "flipped_plain_pages": _damage_pages(_parquet(episode, compression="none"), "flip"),
    }
    return {f"{base}/{kind}-000000-bad.parquet": payload for kind, payload in kinds.items()}


SQL_ATTACKS = [
    # item 1: a comment hides the statement type from a prefix check
    "/*xxxxxSELECT 1 --*/EXPLAIN ANALYZE COPY (SELECT 'written' AS m) TO 'pwn.csv'",
    "EXPLAIN ANALYZE COPY (SELECT 1) TO 'pwn.csv'",
    "EXPLAIN (ANALYZE) DELETE FROM steps",
    "EXPLAIN ANALYZE (FORMAT json) INSERT INTO steps SELECT * FROM steps",
    "SELECT 1; COPY (SELECT 1) TO 'pwn.csv'",
    # item 2: files, the environment, logging to files, the network, extensions, settings
    "SELECT regexp_extract(content, 'AWS_SECRET_ACCESS_KEY=[^\\x00]*') FROM read_text('/proc/self/environ')",
    "SELECT content FROM read_text('/proc/self/environ')",
    "EXPLAIN ANALYZE SELECT content FROM read_text('/proc/self/environ')",
    "SELECT * FROM read_text('{store}/../outside.txt')",
    "SELECT * FROM glob('/*')",
    "SELECT * FROM read_csv('http://127.0.0.1:9/x.csv')",
    "SELECT * FROM enable_logging(storage = 'file', storage_config = {{'path': 'pwn_logs'}})",
    "CALL enable_logging(storage = 'file', storage_config = {{'path': 'pwn_logs'}}); SELECT write_log('pwn')",
    "COPY (SELECT 1) TO 'pwn.csv'",
    "COPY (SELECT 1) TO '{store}/trajectories/pwn.csv'",
    "ATTACH 'pwn.duckdb'",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "RESET enable_external_access",
    "SET lock_configuration = false",
    "PRAGMA enable_profiling = 'json'",
]

SQL_ALLOWED = [
    "SELECT count(*) AS n FROM episodes",
    "/*c*/ EXPLAIN SELECT 1",
    "EXPLAIN (FORMAT json) SELECT 1",
    "-- a comment first\nEXPLAIN ANALYZE SELECT count(*) FROM steps",
    "EXPLAIN (SELECT family FROM episodes)",
    "DESCRIBE episodes",
    "SELECT * FROM glob('{store}/trajectories/**/*.parquet')",
]


@dataclass
class KillReport:
    kills: int = 0
    crashed: int = 0  # children that died before the kill (not of the injected fault)
    acked: int = 0  # episodes whose flush returned in a child
    corrupt: int = 0  # visible shards that cannot be read
    lost: int = 0  # acknowledged episodes in no readable shard
    temps_before_sweep: int = 0
    leaked: int = 0  # temp files left after the sweep


def _temps(store: Store) -> list[Path]:
    return list(Path(store.root).rglob(".*.tmp")) if store.is_local else []


def kill_writer_loop(
    store: Store, kills: int, *, kb: int = 2048, seed: int = 0, work: Path, max_delay_s: float = 0.5
) -> KillReport:
    """SIGKILL a child shard writer `kills` times, each at a random moment after its first flush."""
    rng = np.random.default_rng(seed)
    report = KillReport(kills=kills)
    acked: set[str] = set()
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root))
    for i in range(kills):
        ack = work / f"ack-{i}.txt"
        child = subprocess.Popen(
            [sys.executable, "-m", "bench.probes", "writer", store.uri, str(ack), str(kb)],
            env=env,
            cwd=work,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while (
            child.poll() is None and time.monotonic() < deadline and not (ack.exists() and ack.stat().st_size)
        ):
            time.sleep(0.02)
        time.sleep(float(rng.uniform(0.0, max_delay_s)))
        if child.poll() is not None:
            report.crashed += 1
        else:
            child.send_signal(signal.SIGKILL)
            child.wait()
        if ack.exists():
            acked |= set(ack.read_text().split())
    report.acked = len(acked)
    present: set[str] = set()
    for shard in list_shards(store):
        table, bad = try_read_shard(store, shard.path, mode="record")
        if table is None or bad is not None:
            report.corrupt += 1
        else:
            present |= set(table.column("episode_id").to_pylist())
    report.lost = len(acked - present)
    report.temps_before_sweep = len(_temps(store))
    sweep_stale_temps(store, min_age_s=0)
    report.leaked = len(_temps(store))
    return report


def _writer(uri: str, ack_file: str, kb: int) -> None:
    """The child: episodes of ~`kb` KiB of incompressible screenshots, one shard each, acked after
    their flush returned (so an acked episode is one the writer told its caller was stored)."""
    store = open_store(uri)
    rng = np.random.default_rng(os.getpid())
    config = ShardWriterConfig(
        pool="pool_k", collector_id=f"k{os.getpid()}", flush_episodes=1, flush_seconds=0
    )
    writer = ShardWriter(store, config)
    with open(ack_file, "a") as acks:
        while True:
            episode = synthetic_episode(rng, n_steps=8)
            shots = pa.array([os.urandom(kb * 128) for _ in range(8)], pa.binary())
            episode = episode.set_column(
                episode.schema.get_field_index("screenshot_png"), "screenshot_png", shots
            )
            writer.add_episode(episode)  # flush_episodes=1: returns once the shard is stored
            acks.write(episode.column("episode_id")[0].as_py() + "\n")
            acks.flush()


if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == "writer":
    _writer(sys.argv[2], sys.argv[3], int(sys.argv[4]))


def debug_sql_count(
    store_uri: str, env: dict[str, str], cwd: Path, timeout_s: float = 300
) -> subprocess.CompletedProcess[str]:
    """`distrl -vv sql "SELECT count(*) FROM episodes"` in a child process: the most talkative way to
    touch S3 (botocore logs every signed request), for probes that look for leaked secrets."""
    argv = [sys.executable, "-m", "ops.cli", "-vv", "sql", "SELECT count(*) AS n FROM episodes", "--store"]
    return subprocess.run(
        [*argv, store_uri], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout_s
    )
