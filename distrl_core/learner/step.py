"""One training step: sample a batch, update the learner on it, write the new priorities back.

The in-process loop (``local_loop.train_rounds``) and the learner task (``tasks.learner.train_block``)
both train through it; they differ only in where a batch comes from and where priorities go::

    replay = InMemoryReplay()
    replay.add(rows)
    step = train_step(
        learner,
        lambda: Draw(*replay.sample(16, learner.beta_at())),
        replay.update_priorities,
    )
    step.metrics["actor_loss"], step.steps, step.update_s
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from distrl_core.learner.batch import StepBatch
from distrl_core.learner.learner import Learner

__all__ = ["Draw", "StepResult", "train_step"]


class Draw(NamedTuple):
    """A sampled batch, one entry per trajectory in draw order."""

    keys: np.ndarray  # where each trajectory's priority is written back (replay slots, episode indices)
    rows: Any  # step rows tagged with `sample_idx`: a pyarrow table or a list of step dicts
    is_weights: np.ndarray  # importance-sampling weights


@dataclass(frozen=True)
class StepResult:
    metrics: dict[str, float]  # Learner.update's
    steps: int  # step rows trained on
    update_s: float  # the update and the write-back; the draw is the caller's to time


def train_step(
    learner: Learner,
    sample: Callable[[], Draw],
    write_back: Callable[[np.ndarray, np.ndarray], None],
) -> StepResult:
    """Draw with `sample` (its exceptions, e.g. a replay not ready, pass through), update, and hand
    one new priority per trajectory to `write_back(keys, priorities)`."""
    draw = sample()
    started = time.perf_counter()
    batch = StepBatch.from_rows(draw.rows, draw.is_weights)
    metrics, priorities = learner.update(batch)
    write_back(draw.keys, priorities)
    return StepResult(metrics, batch.num_steps, time.perf_counter() - started)
