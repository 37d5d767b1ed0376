"""DigiRL baselines (doubly-robust step advantage, curriculum, filtered AWR) and filtered BC."""

from __future__ import annotations

import math

import numpy as np
import pytest
import reference_impl as ref
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from random_batches import random_step_batch, rows

from distrl_core.algos import curriculum_mask, digirl_step_advantages, filtered_awr_loss, filtered_bc_loss


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    batch_size=st.integers(1, 6),
    horizon=st.integers(1, 9),
    lam=st.sampled_from([0.0, 0.5, 0.9, 1.0]),
)
def test_digirl_step_advantages_match_reference(seed, batch_size, horizon, lam):
    batch = random_step_batch(seed, batch_size, horizon)
    out = digirl_step_advantages(
        batch.rewards, batch.values, batch.dones, batch.mask, lam=lam, bootstrap_value=batch.bootstrap
    )
    expected = ref.digirl_step_advantages(
        rows(batch.rewards),
        rows(batch.values),
        rows(batch.dones),
        rows(batch.mask),
        lam,
        batch.bootstrap.tolist(),
    )
    torch.testing.assert_close(out, torch.tensor(expected, dtype=torch.float64), atol=1e-9, rtol=0)


def test_digirl_lambda_extremes():
    rewards = torch.tensor([[0.0, -0.1, 0.0, 1.0]])
    values = torch.tensor([[0.2, 0.3, 0.6, 0.9]])
    dones = torch.tensor([[0.0, 0.0, 0.0, 1.0]])
    mask = torch.ones(1, 4)
    # λ = 1: every step gets the episode's final reward (pure Monte-Carlo).
    torch.testing.assert_close(
        digirl_step_advantages(rewards, values, dones, mask, lam=1.0), torch.ones(1, 4)
    )
    # λ = 0: one-step value differences, except the last step whose weight λ^0 = 1 keeps r_H.
    one_step = digirl_step_advantages(rewards, values, dones, mask, lam=0.0)
    torch.testing.assert_close(one_step, torch.tensor([[0.1, 0.2, 0.3, 1.0]]))


@pytest.mark.parametrize("seed", range(20))
def test_curriculum_mask_keeps_the_top_fraction(seed):
    gen = torch.Generator().manual_seed(seed)
    returns = (torch.rand(40, generator=gen) < 0.3).to(torch.float64)
    values = torch.rand(40, generator=gen, dtype=torch.float64)
    keep = curriculum_mask(returns, values, top_fraction=0.2)
    assert keep.tolist() == ref.curriculum_mask(returns.tolist(), values.tolist(), 0.2)
    advantage = returns.numpy() - np.clip(values.numpy(), 1e-4, 1 - 1e-4)
    assert keep.numpy().tolist() == (advantage >= np.quantile(advantage, 0.8)).tolist()
    assert 8 <= int(keep.sum()) <= 9  # 20% of 40, give or take the interpolated cutoff


@pytest.mark.parametrize("seed", range(20))
def test_filtered_awr_loss_matches_reference(seed):
    batch = random_step_batch(seed, 6, 5)
    keep = torch.rand(6, generator=torch.Generator().manual_seed(seed)) < 0.7
    logp = -batch.rho.clone()  # NaN padding
    loss = filtered_awr_loss(logp, batch.values, batch.mask, keep, threshold=0.1)
    expected = ref.filtered_awr_loss(rows(logp), rows(batch.values), rows(batch.mask), keep.tolist(), 0.1)
    assert math.isclose(float(loss), expected, rel_tol=1e-10, abs_tol=1e-12)


def test_filtered_awr_gradient_only_on_kept_steps_above_threshold():
    logp = torch.full((2, 3), -1.0, requires_grad=True)
    advantages = torch.tensor([[0.5, 0.01, 0.3], [0.9, 0.9, 0.9]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    keep = torch.tensor([True, False])
    filtered_awr_loss(logp, advantages, mask, keep, threshold=0.05).backward()
    # 2 kept real steps in the denominator, only (0, 0) is above the threshold.
    torch.testing.assert_close(logp.grad, torch.tensor([[-0.5, 0.0, 0.0], [0.0, 0.0, 0.0]]))


@pytest.mark.parametrize("seed", range(15))
def test_filtered_bc_loss_matches_reference(seed):
    batch = random_step_batch(seed, 6, 5)
    success = (torch.rand(6, generator=torch.Generator().manual_seed(seed)) < 0.5).to(torch.float64)
    logp = -batch.rho.clone()
    loss = filtered_bc_loss(logp, batch.mask, success)
    expected = ref.filtered_bc_loss(rows(logp), rows(batch.mask), success.tolist())
    assert math.isclose(float(loss), expected, rel_tol=1e-10, abs_tol=1e-12)


def test_filtered_bc_with_no_success_is_zero_with_zero_gradient():
    logp = torch.full((3, 4), -2.0, requires_grad=True)
    loss = filtered_bc_loss(logp, torch.ones(3, 4), torch.zeros(3))
    loss.backward()
    assert float(loss.detach()) == 0.0 and bool((logp.grad == 0).all())
