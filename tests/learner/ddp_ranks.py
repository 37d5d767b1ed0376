"""The rank function of tests/learner/test_distributed.py, in a module of its own: spawned
processes import it, and importing the test module would collect its fixtures too."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from bench.learner_hosts import SHIFT_ONLY, policy_state

__all__ = ["SHIFT_ONLY", "adam_bound", "assert_same_weights", "policy_state", "rank_main", "train"]


def adam_bound(lr: float, updates: int) -> float:
    """How far two runs can take ``SHIFT_ONLY`` apart: Adam's largest steps, about 3.2 learning
    rates each (bias-corrected, β = 0.9 / 0.999), on either side."""
    return 2 * 3.2 * lr * updates


def assert_same_weights(got: dict[str, Any], reference: dict[str, Any], *, lr: float, updates: int) -> None:
    """Every weight of ``reference`` (``policy_state``) in ``got`` to 1e-6, the shift-only bias to
    ``adam_bound``."""
    assert got.keys() == reference.keys()
    assert any(name.endswith(SHIFT_ONLY) for name in reference)  # the exception names a real weight
    for name, value in reference.items():
        atol = adam_bound(lr, updates) if name.endswith(SHIFT_ONLY) else 1e-6
        torch.testing.assert_close(got[name], value, atol=atol, rtol=0, msg=name)


def train(learner: Any, rows: list[dict], is_weights: Any, updates: int) -> list[tuple[dict, Any]]:
    """`updates` updates on the same batch: (metrics, priorities) of each."""
    from distrl_core.learner.batch import StepBatch

    return [learner.update(StepBatch.from_rows(rows, is_weights)) for _ in range(updates)]


def rank_main(rank: int, world: int, rendezvous: str, rows: list[dict], is_weights: Any, config: dict,
              updates: int, out: str) -> None:  # fmt: skip
    """One rank: the tiny policy, a learner on its shard of the batch, its results in `out`."""
    import torch.distributed as dist

    from distrl_core.learner import Learner, LearnerConfig
    from distrl_core.learner.distributed import DataParallel
    from distrl_core.policy import Policy, PolicyConfig

    torch.set_num_threads(1)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    dist.init_process_group("gloo", init_method=rendezvous, rank=rank, world_size=world)
    try:
        learner = Learner(Policy.create(PolicyConfig(device="cpu")), LearnerConfig(**config))
        learner.parallel = DataParallel(learner.policy, rank, world)
        results = train(learner, rows, is_weights, updates)
        torch.save({"results": results, "state": policy_state(learner)}, Path(out) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()
