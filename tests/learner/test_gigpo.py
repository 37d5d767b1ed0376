"""gigpo in the learner: group ids from real rows, advantages over the whole batch, no critic."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from distrl_core.learner import Learner, LearnerConfig, StepBatch
from distrl_core.learner.losses.gigpo import group_ids


def _grouped(episode_rows):
    """The 8 episodes as two groups of four (tasks "A" and "B"); the first of each succeeds."""
    order = list(dict.fromkeys(r["episode_id"] for r in episode_rows))
    rows = []
    for r in episode_rows:
        i = order.index(r["episode_id"])
        won = i in (0, 4)
        rows.append(dict(r, task_id="AB"[i // 4], episode_success=won, reward=float(won and r["done"])))
    return rows


def _params(parameters) -> torch.Tensor:
    return torch.cat([p.detach().flatten().clone() for p in parameters])


def test_group_ids_from_rows(episode_rows):
    rows = _grouped(episode_rows)
    for r in rows:  # one episode of task B by an older policy: a group of its own
        if r["episode_id"] == rows[-1]["episode_id"]:
            r["policy_version"] = 2
    batch = StepBatch.from_rows(rows)
    episode, steps = group_ids(batch)
    assert batch.task_ids[:4] == ["A"] * 4
    assert episode.tolist() == [0, 0, 0, 0, 1, 1, 1, 2]
    # Same task and policy, same instruction and screen: the same step group, across episodes; a
    # screen seen in two groups gets two ids; padding is -1.
    seen: dict[tuple, int] = {}
    for step, flat in zip(batch.steps, batch.flat_index.tolist(), strict=True):
        b, t = divmod(flat, batch.shape[1])
        key = (int(episode[b]), step.instruction, step.observation_text)
        assert seen.setdefault(key, int(steps[b, t])) == int(steps[b, t])
    assert len(set(seen.values())) == len(seen)
    assert int((steps >= 0).sum()) == batch.num_steps


def test_gigpo_update_trains_the_actor_without_critic_or_warmup(make_policy, episode_rows):
    policy = make_policy()
    actor, critic = _params(policy.actor_parameters()), _params(policy.critic_parameters())
    learner = Learner(policy, LearnerConfig(algorithm="gigpo"))  # default critic_warmup_updates=20
    metrics, priorities = learner.update(StepBatch.from_rows(_grouped(episode_rows)))
    assert metrics["actor_trained"] == 1.0 and metrics["critic_loss"] == 0.0
    assert {"clip_fraction", "group_singleton_step_fraction", "group_episode_advantage_abs_mean"} <= set(
        metrics
    )
    assert metrics["group_episode_advantage_abs_mean"] > 0
    assert np.array_equal(priorities, np.ones(8))
    assert not torch.equal(actor, _params(policy.actor_parameters()))
    assert torch.equal(critic, _params(policy.critic_parameters()))


@pytest.mark.parametrize("micro_batch_size", [3, 5])
def test_gigpo_groups_span_micro_batches(make_policy, episode_rows, micro_batch_size):
    """The same gradient whether the batch is evaluated whole or in micro-batches that cut groups."""
    rows = _grouped(episode_rows)
    results = []
    for micro in (8, micro_batch_size):
        policy = make_policy()
        config = LearnerConfig(
            algorithm="gigpo", micro_batch_size=micro, entity_dropout=0.0, word_dropout=0.0, seed=3
        )
        Learner(policy, config).update(StepBatch.from_rows(rows))
        # Gradients, not weights: Adam's first step is ~lr·sign(g), which float noise can flip on a
        # near-zero gradient.
        results.append(torch.cat([p.grad.flatten() for p in policy.actor_parameters() if p.grad is not None]))
    torch.testing.assert_close(results[0], results[1], atol=1e-7, rtol=1e-4)


def test_every_entry_point_offers_every_algorithm():
    from typing import get_args

    from distrl_core.learner.config import Algorithm
    from ops.cli import build_parser
    from tasks.learner import LearnerParams

    algorithms = get_args(Algorithm)
    subcommands = next(a for a in build_parser()._actions if a.choices and "retrain" in a.choices)
    retrain = subcommands.choices["retrain"]
    assert set(next(a for a in retrain._actions if a.dest == "algorithm").choices) == set(algorithms)
    assert "gigpo" in algorithms and LearnerParams(algorithm="gigpo").algorithm == "gigpo"
    with pytest.raises(ValueError, match="window=None"):
        LearnerParams(algorithm="gigpo", window=4)
