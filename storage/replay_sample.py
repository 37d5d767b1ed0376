"""One prioritized draw from the replay's DuckDB tables (`Replay.sample`'s work once it may sample).

Slots come from `replay_sql.sample_slots` (the three-stage query), their importance-sampling weights
from the sampling probabilities, and their steps (whole trajectories or windows) from the prepared
`replay_fetch` statement. Every random number comes from the caller's generator, none from DuckDB,
so a seeded generator fixes the draw.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

from storage import replay_sql as sql


@dataclass
class SampleBatch:
    """Trajectories drawn for one learner update. Arrays are indexed by draw (B,)."""

    slots: np.ndarray  # (B,) int64
    episode_ids: list[str]
    probabilities: np.ndarray  # (B,) sampling probability of each draw
    is_weights: np.ndarray  # (B,) importance-sampling weights, max 1
    policy_versions: np.ndarray  # (B,) int64
    window_starts: np.ndarray  # (B,) first step of each draw's window (0 for whole episodes)
    steps: pa.Table  # step rows ordered by (sample_idx, step); `sample_idx` indexes the draw

    @property
    def size(self) -> int:
        return len(self.slots)


def importance_weights(w: np.ndarray, beta: float) -> np.ndarray:
    """IS weights (N * P(i))^-beta normalised by the batch maximum, so they only scale down.

    With P(i) = w_i / total that is (w_i / min w)^-beta: computed from the ratio, it needs neither
    the total nor N, whose product overflowed to inf with huge priorities (every weight NaN).
    """
    w = np.asarray(w, dtype=np.float64)
    if not (np.all(np.isfinite(w)) and np.all(w > 0)):
        raise ValueError(
            "sampling weights must be finite and > 0 (priorities are kept within [min_priority, "
            "MAX_PRIORITY]); a replay table was changed outside the replay"
        )
    return (w / w.min()) ** (-beta)


def last_priorities(
    slots: np.ndarray, priorities: np.ndarray, low: float, high: float
) -> tuple[np.ndarray, np.ndarray]:
    """The loss's priorities checked and clipped to [low, high]; of a slot drawn twice in a batch,
    the last value, as a sequential write-back would keep."""
    slots = np.asarray(slots, dtype=np.int64)
    priorities = np.asarray(priorities, dtype=np.float64)
    if slots.shape != priorities.shape:
        raise ValueError(f"update_priorities: {slots.shape} slots but {priorities.shape} priorities")
    if not np.all(np.isfinite(priorities)):
        raise ValueError("update_priorities: priorities must be finite (got NaN or inf from the loss?)")
    priorities = np.clip(priorities, low, high)
    _, last = np.unique(slots[::-1], return_index=True)
    keep = len(slots) - 1 - last
    return slots[keep], priorities[keep]


def draw_batch(
    con: duckdb.DuckDBPyConnection,
    rng: np.random.Generator,
    batch_size: int,
    *,
    total: float,
    eligible: int,
    beta: float,
    window: int | None,
    super_size: int,
    block_size: int,
) -> SampleBatch:
    """`batch_size` trajectories in proportion to their weight (of `total`, over `eligible` ones)."""
    slots, w = sql.sample_slots(con, rng, batch_size, super_size=super_size, block_size=block_size)
    probs = w / float(total)
    weights = importance_weights(w, beta)
    picks = pa.table(
        {
            "sample_idx": np.arange(batch_size),
            "slot": slots,
            "u": rng.random(batch_size),
            "win": pa.array([window] * batch_size, pa.int64()),
        }
    )
    con.register("picks", picks)
    try:
        steps = con.sql("EXECUTE replay_fetch").to_arrow_table()
    finally:
        con.unregister("picks")
    first = np.searchsorted(steps.column("sample_idx").to_numpy(), np.arange(batch_size))
    return SampleBatch(
        slots=slots,
        episode_ids=steps.column("episode_id").take(first).to_pylist(),
        probabilities=probs,
        is_weights=weights,
        policy_versions=steps.column("policy_version").take(first).to_numpy(),
        window_starts=steps.column("window_start").take(first).to_numpy(),
        steps=steps.drop_columns(["window_start"]),
    )
