"""Hostile shards: values out of range, broken episodes, a decompression bomb, files that are not
files. Shared by tests/reliability (test_hostile_shards.py) and bench/faults.py (larger counts).

- `hostile_shards`: one shard per broken rule of `storage.schema` (each otherwise valid);
- `text_bomb`: 100k rows repeating one 20 KB string: 0.5 MB on disk, 2 GB decoded;
- `plant_special_files`: a FIFO, a link to a FIFO and to a device, names DuckDB reads as a glob,
  a name with an ESC sequence and a newline (local stores);
- `hostile_ingest_probe`: all of them with good shards, ingested by the learner's replay twice
  (a restart), sampled; counts what was lost, not named, or sampled out of range.

`python -m bench.shard_probes bomb STORE_URI` ingests a text bomb in a fresh process and prints its
peak RSS (the measurement of the bomb row; run it against any checkout).
"""

from __future__ import annotations

import base64
import io
import os
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from storage.schema import SCHEMA_VERSION_KEY, STEP_SCHEMA
from storage.store import Store, atomic_put, open_store
from storage.synthetic import synthetic_episode, write_synthetic_episodes

NEWEST_VERSION = 5  # the registry's newest version in the probes; shards use 1


def _parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def _episode(seed: int, n_steps: int = 6) -> pa.Table:
    return synthetic_episode(np.random.default_rng(seed), n_steps=n_steps)


def _with(table: pa.Table, name: str, values: list) -> pa.Table:
    index = table.schema.get_field_index(name)
    field = table.schema.field(name)
    return table.set_column(index, field, pa.array(values, field.type))


def _set(name: str, row: int, value: object):
    def change(table: pa.Table) -> pa.Table:
        values = table.column(name).to_pylist()
        values[row] = value
        return _with(table, name, values)

    return change


# kind -> (how the episode is broken, a word of the rule the quarantine line must name)
BROKEN = {
    "nan_reward": (_set("reward", 2, float("nan")), "MAX_ABS_REWARD"),
    "huge_reward": (_set("reward", 5, 3e38), "MAX_ABS_REWARD"),
    "inf_reward": (_set("reward", 0, float("inf")), "MAX_ABS_REWARD"),
    "nan_logprob": (_set("behaviour_logprob", 1, float("nan")), "MIN_LOGPROB"),
    "tiny_logprob": (_set("behaviour_logprob", 1, -1e30), "MIN_LOGPROB"),
    "huge_logprob": (_set("behaviour_logprob", 1, 1e30), "MAX_LOGPROB"),
    "negative_step": (_set("step", 0, -1), "0..n-1"),
    "duplicate_step": (_set("step", 3, 2), "0..n-1"),
    "huge_step": (_set("step", 5, 2_000_000_000), "0..n-1"),
    "version_2_62": (lambda t: _with(t, "policy_version", [2**62] * t.num_rows), "MAX_POLICY_VERSION"),
    "negative_version": (lambda t: _with(t, "policy_version", [-7] * t.num_rows), "MAX_POLICY_VERSION"),
    "unpublished_version": (
        lambda t: _with(t, "policy_version", [NEWEST_VERSION + 1] * t.num_rows),
        "does not exist",
    ),
    "negative_tokens": (_set("action_token_count", 4, -3), "MAX_ACTION_TOKENS"),
    "no_done": (_set("done", 5, False), "done"),
    "done_midway": (_set("done", 2, True), "done"),
    "nan_latency": (_set("step_latency_ms", 3, float("nan")), "MAX_STEP_LATENCY_MS"),
    "huge_text": (_set("instruction", 0, "y" * (2 << 20)), "MAX_TEXT_BYTES"),
}


def hostile_shards(store: Store, day: str = "2026-11-01", seed: int = 0) -> dict[str, tuple[bytes, str]]:
    """Path -> (payload, rule word) of one shard per broken rule, each with one good episode too:
    a shard is quarantined whole."""
    base = store.path("trajectories", "pool=pool_a", f"date={day}")
    shards = {}
    for i, (kind, (broken, rule)) in enumerate(BROKEN.items()):
        table = pa.concat_tables([_episode(seed * 1000 + 2 * i), broken(_episode(seed * 1000 + 2 * i + 1))])
        shards[f"{base}/{kind}-{seed:06d}-bad.parquet"] = (_parquet(table), rule)
    return shards


def text_bomb(rows: int = 100_000, value_bytes: int = 20_000) -> bytes:
    """A valid-looking shard whose `observation_text` repeats one `value_bytes` string on every row:
    dictionary-encoded on disk (0.5 MB for the defaults), `rows * value_bytes` decoded. Its Arrow
    schema says plain `string`, so a reader that does not measure first decodes it all."""
    one = _episode(1, n_steps=1)
    zeros = pa.array(np.zeros(rows, dtype=np.int32))
    columns = {name: one.column(name).combine_chunks().take(zeros) for name in STEP_SCHEMA.names}
    columns["observation_text"] = pa.DictionaryArray.from_arrays(zeros, pa.array(["x" * value_bytes]))
    columns["episode_id"] = pa.array([uuid.uuid4().hex] * rows)
    columns["step"] = pa.array(np.arange(rows, dtype=np.int32))
    columns["done"] = pa.array(np.arange(rows) == rows - 1)
    table = pa.table(columns)
    sink = io.BytesIO()
    writer = pq.ParquetWriter(sink, table.schema, store_schema=False, compression="zstd")
    writer.write_table(table)
    arrow_schema = base64.b64encode(STEP_SCHEMA.serialize().to_pybytes()).decode()
    writer.add_key_value_metadata({SCHEMA_VERSION_KEY.decode(): "1.0", "ARROW:schema": arrow_schema})
    writer.close()
    return sink.getvalue()


def plant_special_files(store: Store, day: str = "2026-11-02") -> dict[str, str]:
    """Local store only. Path -> what it is: files the learner must skip unopened (or quarantine,
    escaped) and `distrl sql` must leave out, none of which may block or be read as a pattern."""
    folder = Path(store.path("trajectories", "pool=pool_a", f"date={day}"))
    folder.mkdir(parents=True, exist_ok=True)
    good = _parquet(_episode(77))
    planted = {}
    fifo = folder / "x.parquet"
    os.mkfifo(fifo)
    planted[str(fifo)] = "fifo"
    link = folder / "fifo-link.parquet"
    link.symlink_to(fifo)
    planted[str(link)] = "link to a fifo"
    device = folder / "device-link.parquet"
    device.symlink_to("/dev/zero")
    planted[str(device)] = "link to a device"
    for name in ("*.parquet", "c?-000000-glob.parquet", "[ab]-000000-glob.parquet"):
        (folder / name).write_bytes(good)  # a copy of a good shard under a pattern's name
        planted[str(folder / name)] = "glob name"
    nasty = folder / "evil\x1b]0;owned\x07\nERROR forged-000000.parquet"
    nasty.write_bytes(next(iter(hostile_shards(store, day, seed=99).values()))[0])  # a NaN reward
    planted[str(nasty)] = "escape and newline in the name"
    return planted


@dataclass
class IngestProbe:
    attempts: int = 0  # hostile files planted
    lost: int = 0  # good episodes not in the replay
    unnamed: int = 0  # hostile files neither quarantined nor skipped
    out_of_range: int = 0  # sampled values outside the schema's bounds
    crashed: int = 0  # exceptions out of ingest or sample
    refailed: int = 0  # shards a restarted replay quarantined again
    detail: list[str] = field(default_factory=list)


def hostile_ingest_probe(store: Store, *, rounds: int = 1, bomb: bool = True) -> IngestProbe:
    """Good shards plus every hostile kind (`rounds` copies), ingested, sampled, then ingested again
    by a fresh replay (a restart). The replay is given the probe's registry bound."""
    from storage.replay import Replay
    from storage.replay_config import ReplaySettings

    probe = IngestProbe()
    good = set(write_synthetic_episodes(store, 12, flush=3, seed=3))
    hostile: dict[str, str] = {}
    for seed in range(rounds):
        for path, (payload, rule) in hostile_shards(store, seed=seed).items():
            atomic_put(store, path, payload)
            hostile[path] = rule
    if bomb:
        path = store.path("trajectories", "pool=pool_a", "date=2026-11-01", "bomb-000000-bad.parquet")
        atomic_put(store, path, text_bomb())
        hostile[path] = "MAX_SHARD_BYTES"
    if store.is_local:
        hostile |= {path: "" for path in plant_special_files(store)}
    probe.attempts = len(hostile)
    settings = ReplaySettings(min_size_steps=1, samples_per_insert=None)
    moved_before = 0
    for restart in (False, True):
        try:
            with Replay(store, settings, newest_version=lambda: NEWEST_VERSION) as replay:
                replay.ingest()
                moved = _quarantined_files(store)
                if restart:  # nothing left to set aside: everything was moved, or is skipped again
                    probe.refailed = moved - moved_before
                    continue
                moved_before = moved
                rows = replay.con.execute("SELECT path, reason FROM shards WHERE status = 'quarantined'")
                named = dict(rows.fetchall())
                probe.unnamed = sum(p not in named or rule not in named[p] for p, rule in hostile.items())
                probe.detail += [f"not named: {p!r}" for p in hostile if p not in named]
                ids = {row[0] for row in replay.con.execute("SELECT episode_id FROM episodes").fetchall()}
                probe.lost = len(good - ids)
                probe.out_of_range = _sampled_out_of_range(replay)
        except Exception as exc:  # a crash is what the probe counts, not a reason to stop
            probe.crashed += 1
            probe.detail.append(f"{type(exc).__name__}: {exc}"[:300])
    return probe


def _quarantined_files(store: Store) -> int:
    store.fs.invalidate_cache()
    return len(store.fs.find(store.quarantine)) if store.fs.exists(store.quarantine) else 0


def _sampled_out_of_range(replay) -> int:
    from storage.schema import MAX_ABS_REWARD, MAX_LOGPROB, MAX_POLICY_VERSION, MIN_LOGPROB

    steps = replay.sample(64, seed=0).steps
    reward, logprob = steps.column("reward"), steps.column("behaviour_logprob")
    bad = pc.or_(pc.invert(pc.is_finite(reward)), pc.greater(pc.abs(reward), MAX_ABS_REWARD))
    bad = pc.or_(bad, pc.or_(pc.less(logprob, MIN_LOGPROB), pc.greater(logprob, MAX_LOGPROB)))
    bad = pc.or_(bad, pc.invert(pc.is_finite(logprob)))
    bad = pc.or_(bad, pc.greater(steps.column("policy_version"), min(NEWEST_VERSION, MAX_POLICY_VERSION)))
    return int(pc.sum(bad.cast(pa.int64())).as_py() or 0)


def sql_special_files_probe(store: Store, timeout_s: float = 120.0) -> dict[str, int]:
    """`distrl sql` (a child process) over a local store with the special files and a restored copy
    of a shard: counts what blocked or failed, what was not named once, escaped, and the steps
    counted twice."""
    import shutil
    import subprocess

    from storage.catalog import list_shards

    write_synthetic_episodes(store, 6, flush=3, seed=4)
    shard = next(s.path for s in list_shards(store))
    planted = plant_special_files(store)
    expected = _sql_steps(store)  # before the copy: the copy must add nothing
    shutil.copy(shard, Path(shard).with_name("restored-000000-copy.parquet"))
    query = ["sql", "SELECT count(*) FROM steps", "--store", store.uri, "--format", "csv"]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    try:
        done = subprocess.run(
            [sys.executable, "-m", "ops.cli", *query],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return {
            "attempts": len(planted) + 1,
            "corrupt": len(planted),
            "lost": expected,
            "crashed": 1,
            "leaked": 0,
        }
    lines = done.stderr.splitlines()
    unnamed = 0
    for path, kind in planted.items():
        if "escape" not in kind:  # that one is a readable shard: read, its name never printed raw
            escaped = path.replace("\x1b", "\\x1b").replace("\x07", "\\x07").replace("\n", "\\x0a")
            unnamed += sum(escaped in line for line in lines) != 1
    answer = done.stdout.split()[-1] if done.stdout.split() else "0"
    raw = sum("\x1b" in line or not line.startswith("warning: ") for line in lines)
    return {
        "attempts": len(planted) + 1,
        "corrupt": unnamed,
        "lost": abs(int(answer) - expected) if answer.isdigit() else expected,
        "crashed": int(done.returncode != 0),
        "leaked": raw,
    }


def _sql_steps(store: Store) -> int:
    from storage.sql_views import open_sql

    session = open_sql(store, warn=False)
    try:
        return int(session.query("SELECT count(*) FROM steps").column(0)[0].as_py())
    finally:
        session.close()


class FaultContext(Protocol):
    """What a row of bench/faults.py gets: a fresh store of a kind, and the bench's count."""

    kills: int

    def store(self, kind: str) -> Store: ...


def _hostile_shards(kind: str) -> Callable[[FaultContext], dict[str, Any]]:
    def scenario(ctx: FaultContext) -> dict[str, Any]:
        from bench.faults_env import row  # the environment side's imports only when the bench runs

        probe = hostile_ingest_probe(ctx.store(kind), rounds=max(1, ctx.kills // 10))
        return row(
            f"hostile_shards_learner_{kind}",
            probe.attempts,
            corrupt=probe.unnamed,
            lost=probe.lost,
            crashed=probe.crashed + probe.refailed,
            leaked=probe.out_of_range,
            detail="; ".join(probe.detail) or "each quarantined or skipped, rule named; samples in range",
        )

    scenario.__name__ = f"hostile_shards_learner_{kind}"
    return scenario


def sql_special_files_local(ctx: FaultContext) -> dict[str, Any]:
    from bench.faults_env import row

    found = sql_special_files_probe(ctx.store("local"))
    return row("sql_special_files_local", **found, detail="left out once each, escaped; a copy counted once")


# Rows of bench/faults.py (its table's columns: see there). Learner: values out of range, broken
# episodes, a text bomb (and locally FIFOs, device links, glob and escape-laden names) among good
# shards, ingested, sampled, restarted. SQL: the special files and a restored copy of a shard.
SCENARIOS: list[Callable[[FaultContext], dict[str, Any]]] = [
    _hostile_shards("local"),
    _hostile_shards("s3"),
    sql_special_files_local,
]


def _bomb_rss(store_uri: str) -> None:
    """Ingest one text bomb in this process; print the outcome and the peak RSS in MB."""
    import resource

    from storage.replay import Replay
    from storage.replay_config import ReplaySettings

    store = open_store(store_uri)
    atomic_put(
        store, store.path("trajectories", "pool=pool_a", "date=2026-11-01", "bomb.parquet"), text_bomb()
    )
    try:
        with Replay(store, ReplaySettings(min_size_steps=1)) as replay:
            outcome = str(replay.ingest())
    except Exception as exc:
        outcome = f"{type(exc).__name__}: {str(exc)[:200]}"
    print(
        f"{outcome}\npeak RSS {_peak_rss_kb(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) / 1024:.0f} MB"
    )


def _peak_rss_kb(maxrss_kb: int) -> int:
    """This process's own peak RSS: Linux's VmHWM. `ru_maxrss` also counts the parent's memory at
    the fork (the kernel carries the old address space's peak across exec), so a bench started by a
    large pytest process reported that process's gigabytes."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return maxrss_kb


if __name__ == "__main__":
    if sys.argv[1:2] == ["bomb"]:
        _bomb_rss(sys.argv[2])
