"""Fault scenarios of issue 12's probe at larger counts: one JSON table, one row per scenario.

    .venv/bin/python -m bench.faults [--kills 30] [--only kill9_writer_local ...]

Prints the table and writes bench/results/faults.json. Every row has the same columns:
- attempts: faults injected (kills, attack queries, bad shards, logged runs);
- corrupt: unreadable shards left visible, or bad shards not named;
- lost: acknowledged episodes missing from the store, or good episodes missing from an answer;
- crashed: runs that failed other than by the injected fault;
- leaked: stale temp files after the sweep, attack queries that ran, wrote a file or showed a
  secret, secret values in logs.
The injectors are those of tests/reliability (bench/probes.py; collector, fake-ADB and
parser rows from bench/faults_env.py, bounded-input rows from bench/faults_bounds.py), where the same
scenarios run at small counts. To add a row: write `def name(ctx: Context) -> dict` returning
`row(...)` and append it to SCENARIOS.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench.faults_bounds import SCENARIOS as BOUNDS_SCENARIOS
from bench.faults_env import SCENARIOS as ENV_SCENARIOS
from bench.faults_env import row
from bench.faults_learner import SCENARIOS as LEARNER_SCENARIOS
from bench.probes import SQL_ATTACKS, bad_shards, debug_sql_count, kill_writer_loop
from bench.shard_probes import SCENARIOS as SHARD_SCENARIOS
from storage.store import Store, open_store

if TYPE_CHECKING:
    from moto.server import ThreadedMotoServer

ROOT = Path(__file__).resolve().parents[1]

ACCESS_KEY, SECRET_KEY = "AKIAFAULTSBENCH0001", "faults-bench-secret-5d4c3b2a"
JUDGE_KEY = "sk-faults-bench-judge-canary"
SECRETS = (ACCESS_KEY, SECRET_KEY, JUDGE_KEY)


@dataclass
class Context:
    work: Path
    endpoint: str  # the moto server
    kills: int

    def store(self, kind: str) -> Store:
        if kind == "local":
            return open_store(str(self.work / f"store-{uuid.uuid4().hex[:8]}"))
        import boto3

        bucket = f"faults-{uuid.uuid4().hex[:10]}"
        boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
        return open_store(f"s3://{bucket}/runs/faults")

    def folder(self) -> Path:
        path = self.work / uuid.uuid4().hex[:8]
        path.mkdir()
        return path


def _kill9(kind: str) -> Callable[[Context], dict]:
    def scenario(ctx: Context) -> dict:
        # 16 MiB shards: the write and fsync take long enough that many kills land inside them.
        report = kill_writer_loop(
            ctx.store(kind), ctx.kills, kb=16_384, seed=7, work=ctx.folder(), max_delay_s=2.0
        )
        return row(
            f"kill9_shard_writer_{kind}",
            report.kills,
            corrupt=report.corrupt,
            lost=report.lost,
            crashed=report.crashed,
            leaked=report.leaked,
            detail=f"{report.acked} episodes acknowledged; {report.temps_before_sweep} temp files swept",
        )

    scenario.__name__ = f"kill9_shard_writer_{kind}"
    return scenario


def _fill(store: Store, episodes: int) -> int:
    from storage.synthetic import write_synthetic_episodes

    return len(write_synthetic_episodes(store, episodes, seed=0))


def _files(store: Store, cwd: Path) -> set[str]:
    store.fs.invalidate_cache()
    return set(store.fs.find(store.root)) | {str(p) for p in cwd.rglob("*")}


def _sql_bypass(kind: str) -> Callable[[Context], dict]:
    def scenario(ctx: Context) -> dict:
        from storage.sql_views import ReadOnlyError, open_sql

        store, cwd = ctx.store(kind), ctx.folder()
        _fill(store, 6)
        os.chdir(cwd)
        before = _files(store, cwd)
        session = open_sql(store)
        crashed = leaked = 0
        for attack in SQL_ATTACKS:
            query = attack.format(store=store.url(store.root))
            ran = False
            try:
                result, ran = str(session.query(query).to_pylist()), True
            except ReadOnlyError as exc:
                result = str(exc)
            except Exception as exc:  # refused, but not by the guard: count it
                crashed += 1
                result = str(exc)
            wrote = _files(store, cwd) != before
            before = _files(store, cwd)
            leaked += ran or wrote or any(secret in result for secret in SECRETS)  # at most 1 per attack
        session.close()
        os.chdir(ROOT)
        return row(f"sql_bypass_{kind}", len(SQL_ATTACKS), crashed=crashed, leaked=leaked)

    scenario.__name__ = f"sql_bypass_{kind}"
    return scenario


def _bad_shards_sql(kind: str) -> Callable[[Context], dict]:
    def scenario(ctx: Context) -> dict:
        from storage.sql_views import open_sql
        from storage.store import atomic_put

        store = ctx.store(kind)
        good = _fill(store, 9)
        zoo = bad_shards(store)
        for path, payload in zoo.items():
            atomic_put(store, path, payload)
        session = open_sql(store)
        try:
            answered = session.query("SELECT count(*) AS n FROM episodes").column(0)[0].as_py()
            crashed = 0
        except Exception:
            answered, crashed = 0, 1
        named = {b.path for b in session.skipped}
        session.close()
        return row(
            f"bad_shards_sql_{kind}",
            len(zoo),
            corrupt=len(set(zoo) - named),
            lost=good - answered,
            crashed=crashed,
            detail=f"kinds: {', '.join(sorted(p.rsplit('/', 1)[1].split('-')[0] for p in zoo))}",
        )

    scenario.__name__ = f"bad_shards_sql_{kind}"
    return scenario


def sql_resource_limits_local(ctx: Context) -> dict:
    """Runaway queries (issue 20, item 1) under tiny limits: each must stop with its setting named."""
    from storage.sql_views import SqlLimitError, SqlSettings, open_sql

    store = ctx.store("local")
    _fill(store, 3)
    runaway = {
        "DISTRL_SQL_TIMEOUT_S": "SELECT count(*) FROM range(10000000000000)",
        "DISTRL_SQL_MEMORY_LIMIT": "SELECT length(string_agg(repeat('x', 1000), ',')) FROM range(100000)",
        "DISTRL_SQL_MEMORY_LIMIT ": "SELECT repeat('x', 1000) FROM range(30000)",  # the result's size
    }
    session = open_sql(store, settings=SqlSettings(timeout_s=0.5, memory_limit="20MB"))
    crashed = leaked = 0
    for setting, query in runaway.items():
        try:
            session.query(query)
            leaked += 1  # ran to the end: no limit held
        except SqlLimitError as exc:
            crashed += setting.strip() not in str(exc)
        except Exception:
            crashed += 1
    lost = int(session.query("SELECT count(*) FROM episodes").column(0)[0].as_py() != 3)
    session.close()
    return row("sql_resource_limits_local", len(runaway), crashed=crashed, leaked=leaked, lost=lost)


def sql_symlink_and_dot_tmp_local(ctx: Context) -> dict:
    """A symlinked shard and a planted `./.tmp/` file (issue 20, item 12): named and left out, unreadable."""
    from storage.sql_views import open_sql

    store, cwd = ctx.store("local"), ctx.folder()
    good = _fill(store, 6)
    shard = next(Path(store.trajectories).rglob("*.parquet"))
    (cwd / "copy.parquet").write_bytes(shard.read_bytes())
    link = shard.with_name("c9-000000-linked.parquet")
    link.symlink_to(cwd / "copy.parquet")
    (cwd / ".tmp").mkdir()
    (cwd / ".tmp" / "planted.txt").write_text(JUDGE_KEY)
    os.chdir(cwd)
    session = open_sql(store)
    try:
        answered, crashed = session.query("SELECT count(*) FROM episodes").column(0)[0].as_py(), 0
    except Exception:
        answered, crashed = 0, 1
    try:
        leaked = int(
            JUDGE_KEY in str(session.query("SELECT content FROM read_text('.tmp/planted.txt')").to_pylist())
        )
    except Exception:
        leaked = 0
    named = {b.path for b in session.skipped}
    session.close()
    os.chdir(ROOT)
    return row(
        "sql_symlink_and_dot_tmp_local",
        2,
        corrupt=int(str(link) not in named),
        lost=good - answered,
        crashed=crashed,
        leaked=leaked,
    )


def secret_canaries_debug_sql_s3(ctx: Context) -> dict:
    store = ctx.store("s3")
    _fill(store, 3)
    env = dict(os.environ, PYTHONPATH=str(ROOT), DISTRL_JUDGE_API_KEY=JUDGE_KEY)
    done = debug_sql_count(store.uri, env, ctx.folder())
    output = done.stdout + done.stderr
    return row(
        "secret_canaries_debug_sql_s3",
        1,
        crashed=int(done.returncode != 0),
        leaked=sum(output.count(secret) for secret in SECRETS),
        detail=f"{output.count(' DEBUG ')} DEBUG records searched",
    )


def damaged_policy_version(ctx: Context) -> dict:
    from bench.integrity_probes import policy_damage_probe

    report = policy_damage_probe(ctx.folder(), attempts=max(4, ctx.kills // 3))
    return row(
        "damaged_policy_version",
        report.attempts,
        corrupt=report.loaded_damaged,
        crashed=report.unclear,
        detail="; ".join(["byte flips in cached and stored files, a garbled heads.pt", *report.detail]),
    )


def _damaged_snapshot(kind: str) -> Callable[[Context], dict]:
    def scenario(ctx: Context) -> dict:
        from bench.integrity_probes import snapshot_damage_probe

        attempts, crashed, corrupt = snapshot_damage_probe(ctx.store(kind), rounds=max(1, ctx.kills // 10))
        return row(
            f"damaged_priority_snapshot_{kind}",
            attempts,
            corrupt=corrupt,
            crashed=crashed,
            detail="truncated, garbage, empty, missing column, non-numeric version, sampled_steps=1e15",
        )

    scenario.__name__ = f"damaged_priority_snapshot_{kind}"
    return scenario


def disk_full_store_local(ctx: Context) -> dict:
    from bench.integrity_probes import SmallDisk, disk_full_probe

    try:
        disk = SmallDisk(ctx.folder() / "small")
    except (PermissionError, FileNotFoundError) as exc:
        return row("disk_full_store_local", 0, detail=f"skipped: {exc}")
    try:
        acked, lost, crashed = disk_full_probe(disk, episodes=max(8, ctx.kills * 4))
    finally:
        disk.unmount()
    return row(
        "disk_full_store_local", acked, lost=lost, crashed=crashed, detail="2 MiB tmpfs filled to ENOSPC"
    )


def sigterm_train_local(ctx: Context) -> dict:
    from bench.integrity_probes import sigterm_probe

    code, running, shards = sigterm_probe(ctx.folder())
    return row(
        "sigterm_train_local",
        1,
        lost=running,
        crashed=int(code != 143),
        detail=f"exit code {code}; {running} MLflow runs left RUNNING; {shards} shards stored",
    )


def secret_canaries_credentials_file_s3(ctx: Context) -> dict:
    """Keys from a shared credentials file, not the environment (issue 20, item 5), under `-vv`."""
    store = ctx.store("s3")
    _fill(store, 3)
    work = ctx.folder()
    token = "IQoJb3JpZ2luFAULTSBENCHFILETOKEN0001"
    (work / "credentials").write_text(
        f"[default]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n"
        f"aws_session_token = {token}\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    env |= {
        "PYTHONPATH": str(ROOT),
        "AWS_SHARED_CREDENTIALS_FILE": str(work / "credentials"),
        "HOME": str(work),
    }
    done = debug_sql_count(store.uri, env, work)
    output = done.stdout + done.stderr
    return row(
        "secret_canaries_credentials_file_s3",
        1,
        crashed=int(done.returncode != 0),
        leaked=sum(output.count(secret) for secret in (*SECRETS, token)),
        detail=f"{output.count(' DEBUG ')} DEBUG records searched",
    )


def _env(scenario: Callable[[], dict]) -> Callable[[Context], dict]:
    """A scenario of bench/faults_env.py (collectors, fake ADB, parser), which needs no store."""

    def run(ctx: Context) -> dict:
        return scenario()

    run.__name__ = scenario.__name__
    return run


SCENARIOS: list[Callable[[Context], dict]] = [
    _kill9("local"),
    _kill9("s3"),
    _sql_bypass("local"),
    _sql_bypass("s3"),
    _bad_shards_sql("local"),
    _bad_shards_sql("s3"),
    sql_resource_limits_local,
    sql_symlink_and_dot_tmp_local,
    secret_canaries_debug_sql_s3,
    damaged_policy_version,
    _damaged_snapshot("local"),
    _damaged_snapshot("s3"),
    disk_full_store_local,
    sigterm_train_local,
    secret_canaries_credentials_file_s3,
    *SHARD_SCENARIOS,  # hostile shards: bench/shard_probes.py
    *(_env(scenario) for scenario in ENV_SCENARIOS),
    *(_env(scenario) for scenario in LEARNER_SCENARIOS),
    *(_env(scenario) for scenario in BOUNDS_SCENARIOS),
]


def _moto() -> tuple[ThreadedMotoServer, str]:
    from moto.server import ThreadedMotoServer

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return server, f"http://127.0.0.1:{port}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=30, help="SIGKILLs per store in the kill -9 scenarios")
    parser.add_argument("--only", nargs="*", default=None, help="scenario names (default: all)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "faults.json"))
    args = parser.parse_args()
    server, endpoint = _moto()
    os.environ.update(
        AWS_ACCESS_KEY_ID=ACCESS_KEY,
        AWS_SECRET_ACCESS_KEY=SECRET_KEY,
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ENDPOINT_URL=endpoint,
        DISTRL_JUDGE_API_KEY=JUDGE_KEY,
    )
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="distrl-faults-") as work:
            ctx = Context(work=Path(work), endpoint=endpoint, kills=args.kills)
            for scenario in SCENARIOS:
                if args.only and scenario.__name__ not in args.only:
                    continue
                rows.append(scenario(ctx))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    finally:
        os.chdir(ROOT)
        server.stop()
    table = {"scenarios": rows, "kills_per_store": args.kills}
    Path(args.out).write_text(json.dumps(table, indent=2) + "\n")
    print(json.dumps(table, indent=2))


if __name__ == "__main__":
    main()
