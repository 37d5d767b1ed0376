"""GiGPO-style group-relative advantages and the clipped-ratio loss against plain-loop references."""

from __future__ import annotations

import math

import pytest
import reference_impl as ref
import torch
from random_batches import random_step_batch, rows

from distrl_core.algos import ActorTerms, clipped_policy_loss, gigpo_advantages, group_normalize


def random_groups(seed: int, batch: int, horizon: int, n_episode_groups: int, n_states: int):
    gen = torch.Generator().manual_seed(seed + 1)
    episode = torch.randint(0, n_episode_groups, (batch,), generator=gen)
    # Few distinct states, so step groups of every size (1, 2, many) occur, across rows and within one.
    states = torch.randint(0, n_states, (batch, horizon), generator=gen)
    return episode, states


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("use_std", [True, False])
def test_gigpo_advantages_match_reference(seed, use_std):
    gen = torch.Generator().manual_seed(seed)
    batch_size, horizon = (
        int(torch.randint(1, 9, (1,), generator=gen)),
        int(torch.randint(1, 7, (1,), generator=gen)),
    )
    batch = random_step_batch(seed, batch_size, horizon, done_prob=0.1)
    episode_groups, step_groups = random_groups(seed, batch_size, horizon, 3, 3)
    gamma, omega = [0.0, 0.5, 0.9, 1.0][seed % 4], [1.0, 0.5, 0.0][seed % 3]
    out = gigpo_advantages(
        batch.rewards, batch.dones, batch.mask, episode_groups, step_groups,
        gamma=gamma, omega=omega, use_std=use_std, eps=1e-6,
    )  # fmt: skip
    advantages, episode, step, returns = ref.gigpo_advantages(
        rows(batch.rewards), rows(batch.dones), rows(batch.mask), episode_groups.tolist(),
        step_groups.tolist(), gamma, omega, use_std, 1e-6,
    )  # fmt: skip
    f64 = torch.float64
    torch.testing.assert_close(out.returns, torch.tensor(returns, dtype=f64), atol=1e-12, rtol=0)
    torch.testing.assert_close(out.episode, torch.tensor(episode, dtype=f64), atol=1e-12, rtol=0)
    torch.testing.assert_close(out.step, torch.tensor(step, dtype=f64), atol=1e-12, rtol=0)
    torch.testing.assert_close(out.advantages, torch.tensor(advantages, dtype=f64), atol=1e-12, rtol=0)
    assert not out.advantages.isnan().any()


def test_two_episodes_of_one_task_by_hand():
    # Episode 0 succeeds in 2 steps, episode 1 fails in 3; both start from screen 7, then part ways.
    rewards = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    dones = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
    states = torch.tensor([[7, 8, 0], [7, 9, 9]])
    plain = gigpo_advantages(rewards, dones, mask, torch.tensor([3, 3]), states, gamma=0.5, use_std=False)
    # A^E = R − mean R = ±0.5; the shared first screen has G = 0.5 and 0: A^S = ±0.25; the screens
    # seen by one episode only add nothing (screen 9 twice in one episode: G = 0, 0, so A^S = 0).
    expected = torch.tensor([[0.75, 0.5, 0.0], [-0.75, -0.5, -0.5]], dtype=torch.float64)
    torch.testing.assert_close(plain.advantages, expected)
    scaled = gigpo_advantages(rewards, dones, mask, torch.tensor([3, 3]), states, gamma=0.5, eps=0.0)
    # Sample std of (1, 0) is 1/√2, of (0.5, 0) is 0.5/√2: both levels become ±1/√2.
    r = 1 / math.sqrt(2)
    torch.testing.assert_close(
        scaled.advantages, torch.tensor([[2 * r, r, 0.0], [-2 * r, -r, -r]], dtype=torch.float64)
    )
    assert float(plain.singleton_step_fraction) == pytest.approx(1 / 5)  # screen 8 only


def test_singleton_groups_and_empty_rows_contribute_nothing():
    rewards = torch.tensor([[1.0, 2.0], [5.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    # Rows 1 and 2 share a task, but row 2 has no real step: row 1 is alone in its group.
    out = gigpo_advantages(
        rewards, torch.zeros_like(rewards), mask, torch.tensor([0, 1, 1]), torch.tensor([[1, 2], [1, 1], [1, 1]]),
        gamma=0.9,
    )  # fmt: skip
    assert torch.equal(out.advantages, torch.zeros_like(rewards))
    assert float(out.singleton_step_fraction) == 1.0


def test_group_normalize_ignores_invalid_entries_even_if_nan():
    x = torch.tensor([1.0, 3.0, float("nan"), 10.0], dtype=torch.float64)
    normalised, sizes = group_normalize(
        x, torch.tensor([4, 4, 4, 2]), torch.tensor([True, True, False, True]), use_std=False
    )
    torch.testing.assert_close(normalised, torch.tensor([-1.0, 1.0, 0.0, 0.0], dtype=torch.float64))
    assert sizes.tolist() == [2.0, 2.0, 0.0, 1.0]


@pytest.mark.parametrize("seed", range(20))
def test_clipped_policy_loss_matches_reference(seed):
    batch = random_step_batch(seed, 5, 6)
    gen = torch.Generator().manual_seed(seed)
    logp = (-batch.rho).clone().requires_grad_(True)  # NaN padding
    logp_mu = logp.detach() + 0.4 * torch.randn(5, 6, generator=gen, dtype=torch.float64)
    entropy = torch.rand(5, 6, generator=gen, dtype=torch.float64)
    out = clipped_policy_loss(
        logp, logp_mu, batch.values, batch.mask, clip_eps=0.2,
        terms=ActorTerms(entropy=entropy, entropy_coef=0.01),
    )  # fmt: skip
    expected = ref.clipped_policy_loss(
        rows(logp.detach()), rows(logp_mu), rows(batch.values), rows(batch.mask), 0.2, rows(entropy), 0.01
    )
    assert math.isclose(float(out.loss.detach()), expected, rel_tol=1e-10, abs_tol=1e-12)
    out.loss.backward()
    assert not logp.grad.isnan().any() and float(logp.grad[batch.mask == 0].abs().sum()) == 0.0


def test_clipping_stops_the_gradient_only_beyond_the_trust_region():
    logp_mu = torch.zeros(1, 4)
    # ratios e^0.5 ≈ 1.65 and e^-0.5 ≈ 0.61 are outside [0.8, 1.2]; e^0.1 ≈ 1.11 inside.
    logp = torch.tensor([[0.5, 0.5, -0.5, 0.1]], requires_grad=True)
    advantages = torch.tensor([[1.0, -1.0, -1.0, 1.0]])
    out = clipped_policy_loss(logp, logp_mu, advantages, torch.ones(1, 4), clip_eps=0.2)
    out.loss.backward()
    grad = logp.grad[0]
    # Pushed further up with A > 0 (clipped: no gradient); pulled back down with A < 0 (unclipped:
    # gradient); below the region with A < 0 (clipped); inside the region (gradient −r·A/4).
    assert grad[0] == 0 and grad[2] == 0
    assert grad[1] == pytest.approx(math.exp(0.5) / 4) and grad[3] == pytest.approx(-math.exp(0.1) / 4)
    assert float(out.clip_fraction) == pytest.approx(0.5)
