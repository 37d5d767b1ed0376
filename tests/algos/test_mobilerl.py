"""MobileRL-style options (positive replay, failure curriculum, shortest-path reward) against
plain-loop references, plus the direction each one must push."""

from __future__ import annotations

import pytest
import reference_mobilerl as ref
import torch
from random_batches import random_step_batch, rows

from distrl_core.algos.mobilerl import (
    failure_curriculum_weights,
    positive_replay_multiplier,
    shortest_path_rewards,
)


@pytest.mark.parametrize("seed", range(20))
def test_positive_replay_multiplier_matches_reference(seed):
    gen = torch.Generator().manual_seed(seed)
    size = int(torch.randint(1, 12, (1,), generator=gen))
    success = (torch.rand(size, generator=gen) < 0.5).to(torch.float64)
    rate = torch.rand(size, generator=gen, dtype=torch.float64) * 1.2 - 0.1  # a little outside [0, 1]
    strength = [0.0, 0.5, 2.0, 4.0][seed % 4]
    out = positive_replay_multiplier(success, rate, strength=strength)
    expected = ref.positive_replay_multiplier(success.tolist(), rate.tolist(), strength)
    torch.testing.assert_close(out, torch.tensor(expected, dtype=torch.float64), atol=1e-12, rtol=0)


def test_hard_tasks_successes_are_replayed_more_than_easy_ones():
    success = torch.tensor([1.0, 1.0, 0.0])
    out = positive_replay_multiplier(success, torch.tensor([0.1, 0.9, 0.1]), strength=2.0)
    assert out[0] > out[1] > 1.0 and out[2] == 1.0


@pytest.mark.parametrize("seed", range(20))
def test_failure_curriculum_weights_match_reference(seed):
    gen = torch.Generator().manual_seed(seed)
    size = int(torch.randint(1, 12, (1,), generator=gen))
    attempts = torch.randint(0, 8, (size,), generator=gen)
    successes = torch.minimum(attempts, torch.randint(0, 3, (size,), generator=gen))
    min_attempts, floor = 1 + seed % 5, [0.05, 0.2, 1.0][seed % 3]
    out = failure_curriculum_weights(attempts, successes, min_attempts=min_attempts, floor=floor)
    expected = ref.failure_curriculum_weights(attempts.tolist(), successes.tolist(), min_attempts, floor)
    torch.testing.assert_close(out, torch.tensor(expected, dtype=torch.float64), atol=0, rtol=0)


def test_a_never_solved_task_is_weighted_down_only_after_enough_attempts():
    out = failure_curriculum_weights(
        torch.tensor([2, 3, 3]), torch.tensor([0, 0, 1]), min_attempts=3, floor=0.1
    )
    assert out.tolist() == [1.0, pytest.approx(0.1), 1.0]


@pytest.mark.parametrize("seed", range(20))
def test_shortest_path_rewards_match_reference(seed):
    gen = torch.Generator().manual_seed(seed)
    size, horizon = (
        int(torch.randint(1, 9, (1,), generator=gen)),
        int(torch.randint(1, 8, (1,), generator=gen)),
    )
    batch = random_step_batch(seed, size, horizon)
    success = (torch.rand(size, generator=gen) < 0.6).to(torch.float64)
    shortest = torch.randint(0, horizon + 2, (size,), generator=gen).to(torch.float64)
    exponent = [1.0, 0.5, 2.0, 0.0][seed % 4]
    out = shortest_path_rewards(batch.rewards, batch.mask, success, shortest, exponent=exponent)
    expected = ref.shortest_path_rewards(
        rows(batch.rewards), rows(batch.mask), success.tolist(), shortest.tolist(), exponent
    )
    real = batch.mask > 0
    torch.testing.assert_close(
        out[real], torch.tensor(expected, dtype=torch.float64)[real], atol=1e-12, rtol=0
    )


def test_a_longer_success_earns_less_than_the_shortest():
    rewards = torch.tensor([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    out = shortest_path_rewards(rewards, mask, torch.tensor([1.0, 1.0]), torch.tensor([2.0, 2.0]))
    assert out[0, 1] == 1.0 and out[1, 3] == pytest.approx(0.5)
