"""Rows of bench/faults.py for inputs that must stay bounded: priority snapshots, one large SQL
value, a collector on a full disk, hostile UI dumps, a hostile judge server and command-line numbers.

    .venv/bin/python -m bench.faults --only snapshot_bounds sql_large_value ...

Each row says `crashed` for a case answered other than by the bound's own error (a traceback, an
error that names no limit, a replay that cannot sample, a NaN weight), `leaked` for a case that got
past its bound (a value larger than the limit, a dump or body accepted, a buffer past its cap), and
`lost` for episodes acknowledged and then missing. `detail` has the times and peak memory.
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.faults_env import row

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT_COUNTERS = [(10**18, 10**15), (10**12, 10**12), (10**6, 8 * 10**6)]  # inserted, sampled
HUGE_PRIORITIES = [1e308, 1.7e308, 1e200]


def _run_child(argv: list[str], env: dict[str, str], timeout_s: float = 600) -> tuple[int, str, float, int]:
    """Exit code, stderr, seconds and peak RSS (MB) of one `python -m ops.cli` child."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ops.cli", *argv], env=env, stdout=subprocess.DEVNULL, stderr=err
        )
        timer = threading.Timer(timeout_s, proc.kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak, not every child's
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode(errors="replace")
    return proc.returncode, text, time.monotonic() - started, usage.ru_maxrss // 1024


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def _one_line_error(text: str) -> bool:
    lines = text.strip().splitlines()
    return len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in text


def snapshot_bounds() -> dict[str, Any]:
    """Snapshots whose counters claim more steps than the store holds, or whose priorities overflow."""
    import numpy as np
    import pyarrow as pa

    from storage.rate_limiter import ReplayNotReady
    from storage.replay import Replay
    from storage.replay_config import ReplaySettings
    from storage.replay_snapshot import write_priority_snapshot
    from storage.store import open_store
    from storage.synthetic import write_synthetic_episodes

    crashed = corrupt = 0
    cases = [(c, [3.0]) for c in SNAPSHOT_COUNTERS] + [((0, 0), [p]) for p in HUGE_PRIORITIES]
    with tempfile.TemporaryDirectory() as work:
        for i, ((inserted, sampled), first) in enumerate(cases):
            store = open_store(f"{work}/store{i}")
            ids = write_synthetic_episodes(store, 12, flush=3, collector="c0")
            path = store.path("replay", "L1", "priorities.parquet")
            table = pa.table(
                {"episode_id": ids, "priority": first * 2 + [1.0] * 10}
            )  # two: their sum overflows
            write_priority_snapshot(
                store, path, table, max_priority=first[0], inserted_steps=inserted, sampled_steps=sampled, policy_version=0
            )  # fmt: skip
            settings = ReplaySettings(min_size_steps=1, samples_per_insert=4.0, alpha=1.0, learner_id="L1")
            replay = Replay(store, settings)
            replay.ingest()
            try:
                weights = replay.sample(32, beta=1.0, seed=i).is_weights
                crashed += int(not np.all(np.isfinite(weights)))
            except (ReplayNotReady, ValueError):
                crashed += 1
            if inserted > 0:  # counters beyond this 12-episode store: set aside, not restored
                corrupt += int(store.fs.exists(path))
            replay.close()
    return row(
        "snapshot_bounds",
        len(cases),
        corrupt=corrupt,
        crashed=crashed,
        detail="inserted/sampled 1e18/1e15, 1e12/1e12, 1e6/8e6 over a 12-episode store; priorities 1e308, "
        "1.7e308, 1e200 with alpha=1 (bounded to MAX_PRIORITY, every weight finite)",
    )


def sql_large_value() -> dict[str, Any]:
    """One value built by a query past DISTRL_SQL_MEMORY_LIMIT=200MB, through `distrl sql`."""
    from storage.store import open_store
    from storage.synthetic import write_synthetic_episodes

    queries = [
        "SELECT length(repeat('x', 1500000000))",
        "SELECT length(string_agg(repeat('y', 1000000), '')) FROM range(2000)",
        "SELECT octet_length(repeat('x'::BLOB, 1500000000))",
    ]
    crashed = leaked = 0
    details = []
    with tempfile.TemporaryDirectory() as work:
        store = open_store(f"{work}/store")
        write_synthetic_episodes(store, 3, flush=3, collector="c0")
        for query in queries:
            code, err, seconds, rss = _run_child(
                ["sql", "--store", store.uri, query], _env(DISTRL_SQL_MEMORY_LIMIT="200MB")
            )
            leaked += int(code == 0)
            crashed += int(code != 0 and not (_one_line_error(err) and "DISTRL_SQL_MEMORY_LIMIT" in err))
            details.append(f"{seconds:.1f} s {rss} MB")
    return row("sql_large_value", len(queries), crashed=crashed, leaked=leaked, detail="; ".join(details))


def collector_buffer_full_disk() -> dict[str, Any]:
    """A collector's batches on a full tmpfs: the buffer stops at its cap, nothing is lost."""
    import numpy as np

    from bench.integrity_probes import SmallDisk
    from storage.catalog import list_shards, read_shard
    from storage.shards import ShardWriter, ShardWriterConfig
    from storage.store import open_store
    from storage.synthetic import synthetic_episode
    from tasks.collector import wait_for_room

    with tempfile.TemporaryDirectory() as work:
        try:
            disk = SmallDisk(Path(work) / "small")
        except (PermissionError, FileNotFoundError) as exc:
            return row("collector_buffer_full_disk", 0, detail=f"skipped: {exc}")
        try:
            store = open_store(str(disk.path / "store"))
            cap, batch = 16, 8
            config = ShardWriterConfig(
                pool="p", collector_id="c0", flush_episodes=4, flush_seconds=0, retry_seconds=0.05, max_buffered_episodes=cap
            )  # fmt: skip
            writer = ShardWriter(store, config)
            session = type(
                "S", (), {"writer": writer, "params": config, "should_stop": staticmethod(lambda: False)}
            )
            rng, acked, peak, batches = np.random.default_rng(0), [], 0, 40
            disk.fill()
            threading.Timer(2.0, disk.free).start()
            for _ in range(batches):  # the collector's loop: wait for room, then run one batch
                wait_for_room(session)  # type: ignore[arg-type]
                for _ in range(batch):
                    episode = synthetic_episode(rng)
                    writer.add_episode(episode)
                    acked.append(episode.column("episode_id")[0].as_py())
                peak = max(peak, writer.buffered_episodes)
            writer.close()
            stored: set[str] = set()
            for shard in list_shards(store):
                stored |= set(read_shard(store, shard.path).column("episode_id").to_pylist())
        finally:
            disk.unmount()
    return row(
        "collector_buffer_full_disk",
        len(acked),
        lost=len(set(acked) - stored),
        leaked=int(peak > cap + batch),
        detail=f"{batches} batches of {batch} on a full 2 MiB tmpfs freed after 2 s; buffer peak {peak} episodes "
        f"(cap {cap} + one batch)",
    )


def adb_dump_limits() -> dict[str, Any]:
    """Hostile `uiautomator dump`s through the fake ADB server: each refused naming its limit."""
    from simulators.adb import AdbEnvConfig, UiDumpError
    from simulators.adb.link import AdbDeviceLink
    from simulators.fake_adb import FakeAdbConfig, FakeAdbServer

    node = '<node text="" resource-id="com.example:id/container" class="android.widget.FrameLayout" clickable="true" bounds="[0,0][1080,1920]">'
    head = '<?xml version="1.0" encoding="UTF-8"?><hierarchy rotation="0">'
    cases: list[tuple[str, Callable[[], str], str]] = [
        (
            "58 MB deep",
            lambda: head + node * 420_000 + "</node>" * 420_000 + "</hierarchy>",
            "max_ui_dump_bytes",
        ),
        ("117 MB wide", lambda: head + (node + "</node>") * 850_000 + "</hierarchy>", "max_ui_dump_bytes"),
        (
            "2 MB, 15k levels",
            lambda: head + node * 15_000 + "</node>" * 15_000 + "</hierarchy>",
            "max_ui_depth",
        ),
        ("3 MB, 21k nodes", lambda: head + (node + "</node>") * 21_000 + "</hierarchy>", "max_ui_nodes"),
        ("malformed", lambda: head + node + "<node", "not readable XML"),
    ]
    crashed = leaked = 0
    details = []
    os.environ.setdefault("ADBUTILS_ADB_PATH", "/bin/false")
    with tempfile.TemporaryDirectory() as work:
        token = Path(work) / "token"
        token.write_text("t\n")
        with FakeAdbServer(FakeAdbConfig(devices=1, console_auth_token_path=token)) as server:
            for name, make, expected in cases:
                server.device("emulator-5554").phone.ui_xml = make  # type: ignore[method-assign]
                link = AdbDeviceLink(
                    AdbEnvConfig(port=server.port, serial="emulator-5554", retry_delay_s=0.0)
                )
                link.connect()
                started = time.monotonic()
                try:
                    link.ui_dump()
                    leaked += 1
                except UiDumpError as exc:
                    crashed += int(expected not in str(exc) or "animating" in str(exc))
                details.append(f"{name}: {time.monotonic() - started:.2f} s")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return row(
        "adb_dump_limits",
        len(cases),
        crashed=crashed,
        leaked=leaked,
        detail="; ".join(details) + f"; peak RSS {rss} MB (dumps held by the in-process server)",
    )


class _RawHttp:
    """A loopback HTTP server that answers each POST with `send(connection)`, whatever it sends."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.send: Callable[[socket.socket], None] = lambda conn: None
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head and (chunk := conn.recv(65536)):
                head += chunk
            length = next(
                (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0
            )  # fmt: skip
            body = head.split(b"\r\n\r\n", 1)[1]
            while len(body) < length and (chunk := conn.recv(65536)):
                body += chunk
            with contextlib.suppress(OSError):  # the client hung up: what the bound is for
                self.send(conn)

    def close(self) -> None:
        self.sock.close()


def _answer(length: int, parts: Callable[[], Any], pause_s: float = 0.0) -> Callable[[socket.socket], None]:
    def send(conn: socket.socket) -> None:
        conn.sendall(
            f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n".encode()
        )
        for part in parts():
            conn.sendall(part)
            time.sleep(pause_s)

    return send


def judge_hostile_server() -> dict[str, Any]:
    """A judge endpoint that trickles, sends 400 MB, or nests JSON 200k deep (timeout_s=3)."""
    from distrl_core.evaluators.judge import JudgeBadResponse, JudgeUnavailable
    from distrl_core.evaluators.judge_http import HttpJudgeBackend, HttpJudgeConfig
    from distrl_core.evaluators.judge_prompt import JudgePrompt

    body = b'{"choices":[{"message":{"content":"Status: success"}}]}'
    deep = b"[" * 200_000 + b"]" * 200_000
    cases: list[tuple[str, Callable[[socket.socket], None], type[Exception]]] = [
        ("1 byte / 1.5 s", _answer(len(body), lambda: (body[i : i + 1] for i in range(len(body))), 1.5), JudgeUnavailable),
        ("400 MiB body", _answer(400 * 2**20, lambda: (b" " * 2**20 for _ in range(400))), JudgeBadResponse),
        ("200k-deep JSON", _answer(len(deep), lambda: [deep]), JudgeBadResponse),
    ]  # fmt: skip
    crashed = leaked = 0
    details = []
    server = _RawHttp()
    config = HttpJudgeConfig(base_url=server.base_url, model="m", timeout_s=3.0, max_retries=0)
    with HttpJudgeBackend(config) as backend:
        for name, send, expected in cases:
            server.send = send
            started = time.monotonic()
            try:
                backend.complete(JudgePrompt(system="s", user_text="u"))
                leaked += 1
            except expected:
                pass
            except Exception:  # a RecursionError, an unexpected type: counted
                crashed += 1
            details.append(f"{name}: {time.monotonic() - started:.1f} s")
    server.close()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return row(
        "judge_hostile_server",
        len(cases),
        crashed=crashed,
        leaked=leaked,
        detail="; ".join(details) + f"; peak RSS {rss} MB",
    )


def cli_numbers_and_failures() -> dict[str, Any]:
    """Huge numbers on the command line and a registry that is down: one line each, no traceback."""
    huge = "99999999999999999999999"
    cases = [
        ["sql", "--max-rows", huge, "SELECT 1"],
        ["fake-adb", "--seed", huge],
        ["fake-adb", "--devices", huge],
        ["retrain", "--replay", "capacity_steps=1e400"],
        ["retrain", "--learner", f"batch_size={huge}"],
    ]
    crashed = 0
    details = []
    with tempfile.TemporaryDirectory() as work:
        for argv in cases:
            code, err, _, _ = _run_child([*argv, *(["--home", work] if argv[0] == "retrain" else [])], _env())
            crashed += int(code != 2 or "error:" not in err or "Traceback" in err)
        down = _env(DISTRL_MLFLOW_TRACKING_URI="http://127.0.0.1:9", MLFLOW_HTTP_REQUEST_MAX_RETRIES="0")
        code, err, seconds, _ = _run_child(["status", "--home", f"{work}/home"], down)
        crashed += int(code != 1 or not _one_line_error(err))
        details.append(f"status with MLflow down: {len(err.strip().splitlines())} line(s), {seconds:.0f} s")
    return row("cli_numbers_and_failures", len(cases) + 1, crashed=crashed, detail="; ".join(details))


SCENARIOS = [
    snapshot_bounds,
    sql_large_value,
    collector_buffer_full_disk,
    adb_dump_limits,
    judge_hostile_server,
    cli_numbers_and_failures,
]
