"""Decoupled PPO (AReaL) against a plain-loop reference, and its two policies' roles."""

from __future__ import annotations

import math

import pytest
import reference_mobilerl as ref
import torch
from random_batches import random_step_batch, rows

from distrl_core.algos import ActorTerms
from distrl_core.algos.decoupled import decoupled_ppo_loss
from distrl_core.algos.group import clipped_policy_loss


@pytest.mark.parametrize("seed", range(20))
def test_decoupled_ppo_loss_matches_reference(seed):
    batch = random_step_batch(seed, 5, 6)
    gen = torch.Generator().manual_seed(seed)
    logp = (-batch.rho).clone().requires_grad_(True)  # NaN padding
    logp_prox = logp.detach() + 0.3 * torch.randn(5, 6, generator=gen, dtype=torch.float64)
    logp_mu = logp_prox + 0.8 * torch.randn(5, 6, generator=gen, dtype=torch.float64)
    entropy = torch.rand(5, 6, generator=gen, dtype=torch.float64)
    clip_eps, weight_max = [0.1, 0.2, 0.3][seed % 3], [1.0, 2.0, 5.0][seed % 3]
    out = decoupled_ppo_loss(
        logp, logp_prox, logp_mu, batch.values, batch.mask,
        clip_eps=clip_eps, weight_max=weight_max, terms=ActorTerms(entropy=entropy, entropy_coef=0.01),
    )  # fmt: skip
    expected = ref.decoupled_ppo_loss(
        rows(logp.detach()), rows(logp_prox), rows(logp_mu), rows(batch.values), rows(batch.mask),
        clip_eps, weight_max, rows(entropy), 0.01,
    )  # fmt: skip
    assert math.isclose(float(out.loss.detach()), expected, rel_tol=1e-10, abs_tol=1e-12)
    out.loss.backward()
    assert not logp.grad.isnan().any() and float(logp.grad[batch.mask == 0].abs().sum()) == 0.0


def test_with_the_behaviour_policy_as_proximal_it_is_ppo():
    batch = random_step_batch(3, 4, 5)
    logp = -batch.rho
    logp_mu = logp + 0.5
    decoupled = decoupled_ppo_loss(
        logp, logp_mu, logp_mu, batch.values, batch.mask, clip_eps=0.2, weight_max=2.0
    )
    ppo = clipped_policy_loss(logp, logp_mu, batch.values, batch.mask, clip_eps=0.2)
    torch.testing.assert_close(decoupled.loss, ppo.loss)


def test_stale_steps_are_weighted_by_the_truncated_proximal_over_behaviour_ratio():
    # One step, π_θ = π_prox (r = 1), A = 1: the loss is −w with w = min(π_prox/μ, w̄).
    one = torch.ones(1, 1, dtype=torch.float64)
    for gap, expected in ((math.log(0.5), 0.5), (math.log(4.0), 2.0)):
        out = decoupled_ppo_loss(0 * one, 0 * one, -gap * one, one, one, clip_eps=0.2, weight_max=2.0)
        assert float(out.loss) == pytest.approx(-expected)
