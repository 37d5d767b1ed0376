"""Groups for the critic-free group baseline (``algorithm="gigpo"``) in the in-memory loop.

A group is ``group_size`` episodes of one task played by one policy version under one environment
seed, so they start alike and meet the same distractor pop-ups; their outcomes differ only by the
policy's sampled actions. The learner finds the groups again in its batch by (task id, policy
version) (``losses.gigpo.group_ids``), so a batch must hold whole groups: ``sample_groups`` draws them
uniformly (no priorities), as GiGPO trains on whole groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distrl_core.envs.protocol import Task

__all__ = ["group_tasks", "sample_groups"]


def group_tasks(
    train_tasks: Sequence[Task],
    episodes: int,
    group_size: int,
    rng: np.random.Generator,
    probabilities: np.ndarray | None = None,  # (K,) of each task (the failure curriculum); None = uniform
) -> tuple[list[Task], list[int]]:
    """(tasks, reset seeds) for one round: ``episodes // group_size`` distinct tasks (while there
    are enough), each ``group_size`` times in a row under one seed."""
    if group_size < 2:
        raise ValueError(f"group_size={group_size}: a group needs >= 2 episodes to compare; use 4 or more")
    if episodes < group_size:
        raise ValueError(f"episodes_per_round={episodes} is below group_size={group_size}; raise it")
    groups = episodes // group_size
    replace = groups > len(train_tasks) or (
        probabilities is not None and groups > int(np.count_nonzero(probabilities))
    )
    picks = rng.choice(len(train_tasks), size=groups, replace=replace, p=probabilities)
    seeds = rng.integers(2**31, size=groups)
    tasks = [train_tasks[int(i)] for i in picks for _ in range(group_size)]
    return tasks, [int(s) for s in seeds for _ in range(group_size)]


def sample_groups(
    episodes: Sequence[Sequence[dict[str, Any]]],
    groups: int,
    rng: np.random.Generator,
    priorities: Sequence[float] | None = None,  # (N,) of each episode; None = uniform
) -> tuple[np.ndarray, list[dict[str, Any]], np.ndarray]:
    """(episode indices, step rows tagged with ``sample_idx``, unit IS weights) of ``groups`` whole
    groups drawn without replacement (all of them when there are fewer): uniformly, or in
    proportion to the mean priority of each group's episodes (the MobileRL-style options' replay
    multipliers; with them off every priority is equal)."""
    if groups < 1:
        raise ValueError(f"groups={groups}: draw at least one group (batch_size >= group_size)")
    by_key: dict[tuple[str, int], list[int]] = {}
    for index, episode in enumerate(episodes):
        by_key.setdefault((episode[0]["task_id"], int(episode[0]["policy_version"])), []).append(index)
    members = list(by_key.values())
    weights = None
    if priorities is not None:
        means = np.asarray([np.mean([priorities[i] for i in m]) for m in members], dtype=np.float64)
        weights = means / means.sum()
    chosen = rng.choice(len(members), size=min(groups, len(members)), replace=False, p=weights)
    picks = np.asarray([i for g in sorted(chosen.tolist()) for i in members[g]], dtype=np.int64)
    rows = [{**row, "sample_idx": i} for i, pick in enumerate(picks.tolist()) for row in episodes[pick]]
    return picks, rows, np.ones(len(picks))
