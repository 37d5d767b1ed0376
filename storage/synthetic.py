"""Synthetic step tables that follow the schema: for tests, benchmarks and the store walk-through.

They are shaped like real collector output (ragged episode lengths, one policy version per
episode, terminal reward) but carry no real observations.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute

from storage.schema import STEP_SCHEMA

if TYPE_CHECKING:
    from storage.store import Store

FAMILIES = ("general", "webshop")


def synthetic_episode(
    rng: np.random.Generator,
    *,
    pool: str = "pool_a",
    collector_id: str = "c0",
    policy_version: int = 1,
    n_steps: int | None = None,
    episode_id: str | None = None,
    status: str = "ok",
    with_screenshot: bool = False,
) -> pa.Table:
    """One episode's steps as a schema-valid table."""
    n = int(n_steps if n_steps is not None else rng.integers(2, 12))
    family = FAMILIES[int(rng.integers(len(FAMILIES)))]
    task = int(rng.integers(20))
    success = bool(rng.random() < 0.3)
    episode_id = episode_id or uuid.uuid4().hex
    start = datetime(2026, 11, 1, tzinfo=UTC) + timedelta(seconds=float(rng.integers(0, 86_400)))
    steps = np.arange(n, dtype=np.int32)
    rewards = np.zeros(n, dtype=np.float32)
    rewards[-1] = 1.0 if success else 0.0
    columns = {
        "run_id": ["run0"] * n,
        "episode_id": [episode_id] * n,
        "step": steps,
        "pool": [pool] * n,
        "collector_id": [collector_id] * n,
        "device_id": [f"sim-{collector_id}"] * n,
        "env_kind": ["sim"] * n,
        "task_id": [f"{family}/{task:03d}"] * n,
        "task_family": [family] * n,
        "instruction": [f"do task {task}"] * n,
        "observation_text": [f"[{i}] Button 'ok'" for i in range(n)],
        "observation": ["tree"] * n,
        "screenshot_png": [b"\x89PNG fake" if with_screenshot else None] * n,
        "raw_output": ["tap(1)"] * n,
        "action": ["tap(1)"] * n,
        "action_valid": [True] * n,
        "reward": rewards,
        "done": steps == n - 1,
        "episode_success": [success] * n,
        "episode_status": [status] * n,
        "behaviour_logprob": (-rng.random(n)).astype(np.float32),
        "action_token_count": np.full(n, 3, dtype=np.int32),
        "policy_name": ["distrl-policy"] * n,
        "policy_version": np.full(n, policy_version, dtype=np.int64),
        "step_started_at": [start + timedelta(seconds=2 * i) for i in range(n)],
        "step_latency_ms": rng.uniform(50, 500, n).astype(np.float32),
    }
    return pa.Table.from_pydict(columns, schema=STEP_SCHEMA)


def synthetic_bulk(
    rng: np.random.Generator, n_episodes: int, *, steps_per_episode: int = 10, pool: str = "pool_a"
) -> pa.Table:
    """Vectorised: `n_episodes` episodes of exactly `steps_per_episode` steps (for large benchmarks)."""
    n = n_episodes * steps_per_episode
    episode = np.repeat(np.arange(n_episodes), steps_per_episode)
    step = np.tile(np.arange(steps_per_episode, dtype=np.int32), n_episodes)
    last = step == steps_per_episode - 1
    success = rng.random(n_episodes) < 0.3
    family_idx = rng.integers(0, len(FAMILIES), n_episodes)
    task = rng.integers(0, 20, n_episodes)
    ep_ids = pa.array([f"{i:012x}{rng.integers(1 << 30):08x}" for i in range(n_episodes)]).take(
        pa.array(episode)
    )
    families = pa.array(FAMILIES).take(pa.array(family_idx[episode]))
    task_ids = pa.compute.binary_join_element_wise(families, pa.array(task[episode].astype(str)), "/")
    start = np.datetime64("2026-11-01T00:00:00", "us") + (episode * 60 + step * 2).astype("timedelta64[s]")

    def const(value: object, type_: pa.DataType) -> pa.Array:
        return pa.array([value], type_).take(pa.array(np.zeros(n, dtype=np.int64)))

    columns = {
        "run_id": const("run0", pa.string()),
        "episode_id": ep_ids,
        "step": step,
        "pool": const(pool, pa.string()),
        "collector_id": const("c0", pa.string()),
        "device_id": const("sim-c0", pa.string()),
        "env_kind": const("sim", pa.string()),
        "task_id": task_ids,
        "task_family": families,
        "instruction": const("open the settings app", pa.string()),
        "observation_text": const("[0] Button 'Settings' [1] Button 'Clock'", pa.string()),
        "observation": const("tree", pa.string()),
        "screenshot_png": pa.nulls(n, pa.binary()),
        "raw_output": const("tap(0)", pa.string()),
        "action": const("tap(0)", pa.string()),
        "action_valid": pa.array(np.ones(n, dtype=bool)),
        "reward": (last & success[episode]).astype(np.float32),
        "done": last,
        "episode_success": success[episode],
        "episode_status": const("ok", pa.string()),
        "behaviour_logprob": (-rng.random(n)).astype(np.float32),
        "action_token_count": np.full(n, 3, dtype=np.int32),
        "policy_name": const("distrl-policy", pa.string()),
        "policy_version": (episode // max(1, n_episodes // 10)).astype(np.int64),
        "step_started_at": pa.array(start).cast(pa.timestamp("us", tz="UTC")),
        "step_latency_ms": rng.uniform(50, 500, n).astype(np.float32),
    }
    return pa.Table.from_pydict(columns, schema=STEP_SCHEMA)


def write_synthetic_episodes(
    store: Store, episodes: int = 6, *, flush: int = 3, collector: str = "c0", seed: int | None = None
) -> list[str]:
    """Write `episodes` synthetic episodes as shards of `flush` episodes (pool_a); returns their ids.
    For tests and benches that need a small, real store."""
    from storage.shards import ShardWriter, ShardWriterConfig

    rng = np.random.default_rng(len(collector) + episodes if seed is None else seed)
    ids = []
    config = ShardWriterConfig(pool="pool_a", collector_id=collector, flush_episodes=flush, flush_seconds=0)
    with ShardWriter(store, config) as writer:
        for _ in range(episodes):
            episode = synthetic_episode(rng)
            ids.append(episode.column("episode_id")[0].as_py())
            writer.add_episode(episode)
    return ids
