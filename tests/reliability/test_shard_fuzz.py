"""Fuzzed shard contents against the learner's ingest: it never raises, every shard ends up either
ingested or quarantined with a reason (named), exactly the shards a plain-loop reference of the
schema's bounds calls bad are quarantined, and nothing sampled is out of range."""

from __future__ import annotations

import math
import uuid
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from storage.rate_limiter import ReplayNotReady
from storage.replay import Replay
from storage.replay_config import ReplaySettings
from storage.schema import (
    MAX_ABS_REWARD,
    MAX_ACTION_TOKENS,
    MAX_LOGPROB,
    MAX_POLICY_VERSION,
    MAX_STEP_LATENCY_MS,
    MIN_LOGPROB,
    STEP_SCHEMA,
    shard_metadata,
)
from storage.store import Store, atomic_put, open_store
from storage.synthetic import synthetic_episode

NEWEST = 4  # the registry's newest version in this test

f32 = st.floats(width=32)  # NaN, ±inf, ±3e38 included
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def episode_rows(draw, episode_id: str) -> list[dict]:
    n = draw(st.integers(1, 5))
    version = draw(st.one_of(st.integers(0, NEWEST + 1), INT64))
    rows = []
    for i in range(n):
        rows.append(
            {
                "episode_id": episode_id,
                "step": draw(st.one_of(st.just(i), st.just(i), INT32)),
                "done": draw(st.one_of(st.just(i == n - 1), st.just(i == n - 1), st.booleans())),
                "reward": draw(st.one_of(st.floats(-2, 2, width=32), f32)),
                "behaviour_logprob": draw(st.one_of(st.floats(-50, 0, width=32), f32)),
                "action_token_count": draw(st.one_of(st.integers(0, 50), INT32)),
                "step_latency_ms": draw(st.one_of(st.floats(0, 1e4, width=32), f32)),
                "policy_version": draw(st.one_of(st.just(version), st.just(version), INT64)),
            }
        )
    return rows


@st.composite
def shard_rows(draw) -> list[dict]:
    prefix = uuid.uuid4().hex[:8]
    return [row for e in range(draw(st.integers(1, 3))) for row in draw(episode_rows(f"{prefix}-{e}"))]


def reference_is_bad(rows: list[dict]) -> bool:
    """The schema's bounds, one row and one episode at a time."""

    def within(value: float, low: float, high: float) -> bool:
        return math.isfinite(value) and low <= value <= high

    for r in rows:
        if not (
            within(r["reward"], -MAX_ABS_REWARD, MAX_ABS_REWARD)
            and within(r["behaviour_logprob"], MIN_LOGPROB, MAX_LOGPROB)
            and 0 <= r["action_token_count"] <= MAX_ACTION_TOKENS
            and within(r["step_latency_ms"], 0, MAX_STEP_LATENCY_MS)
            and 0 <= r["policy_version"] <= min(MAX_POLICY_VERSION, NEWEST)
        ):
            return True
    episodes: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        episodes[r["episode_id"]].append(r)
    for steps in episodes.values():
        n = len(steps)
        if sorted(r["step"] for r in steps) != list(range(n)):
            return True
        if [r["step"] for r in steps if r["done"]] != [n - 1]:
            return True
    return False


def _write(store: Store, rows: list[dict]) -> str:
    base = synthetic_episode(np.random.default_rng(0), n_steps=1)
    columns = {}
    for field in STEP_SCHEMA:
        if field.name in rows[0]:
            columns[field.name] = pa.array([r[field.name] for r in rows], field.type)
        else:
            columns[field.name] = base.column(field.name).combine_chunks().take([0] * len(rows))
    table = pa.table(columns, schema=STEP_SCHEMA).replace_schema_metadata(shard_metadata("fuzz"))
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    path = store.path("trajectories", "pool=pool_a", "date=2026-11-01", f"fz-{uuid.uuid4().hex}.parquet")
    atomic_put(store, path, sink.getvalue().to_pybytes())
    return path


def test_fuzzed_shards_never_crash_ingest_and_bad_ones_are_named(tmp_path) -> None:
    store = open_store(str(tmp_path / "store"))
    replay = Replay(
        store, ReplaySettings(min_size_steps=1, samples_per_insert=None), newest_version=lambda: NEWEST
    )

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
    @given(rows=shard_rows())
    def check(rows: list[dict]) -> None:
        path = _write(store, rows)
        replay.ingest()  # never raises
        status, reason = replay.con.execute(
            "SELECT status, reason FROM shards WHERE path = ?", [path]
        ).fetchone()
        assert status == ("quarantined" if reference_is_bad(rows) else "ingested"), (status, reason, rows)
        assert status == "ingested" or reason  # a rejected shard is named with its rule
        event(status)
        try:
            steps = replay.sample(8, seed=0).steps.to_pydict()
        except ReplayNotReady:
            return
        for r, p, v in zip(steps["reward"], steps["behaviour_logprob"], steps["policy_version"], strict=True):
            assert math.isfinite(r) and abs(r) <= MAX_ABS_REWARD
            assert math.isfinite(p) and MIN_LOGPROB <= p <= MAX_LOGPROB
            assert 0 <= v <= NEWEST

    try:
        check()
    finally:
        replay.close()
