"""Retrace/V-trace targets, advantages and Monte-Carlo returns against plain-loop references."""

from __future__ import annotations

import math

import pytest
import reference_impl as ref
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from random_batches import random_step_batch, rows

from distrl_core.algos import discounted_returns, importance_ratios, retrace_targets, truncate_ratios

ATOL = 1e-9


def run_retrace(batch, **params):
    return retrace_targets(
        batch.values, batch.rewards, batch.dones, batch.rho, batch.mask, batch.bootstrap, **params
    )


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    batch_size=st.integers(1, 6),
    horizon=st.integers(1, 9),
    gamma=st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0]),
    lam=st.sampled_from([0.0, 0.3, 0.95, 1.0]),
    rho_max=st.sampled_from([0.5, 1.0, 2.0, 100.0]),
    c_max=st.sampled_from([0.5, 1.0, 3.0]),
)
def test_retrace_matches_plain_loop_reference(seed, batch_size, horizon, gamma, lam, rho_max, c_max):
    batch = random_step_batch(seed, batch_size, horizon)
    params = dict(gamma=gamma, lam=lam, rho_max=rho_max, c_max=c_max)
    out = run_retrace(batch, **params)
    v_ref, a_ref, d_ref = ref.retrace(
        rows(batch.values),
        rows(batch.rewards),
        rows(batch.dones),
        rows(batch.rho),
        rows(batch.mask),
        batch.bootstrap.tolist(),
        **params,
    )
    torch.testing.assert_close(out.v_targets, torch.tensor(v_ref, dtype=torch.float64), atol=ATOL, rtol=0)
    torch.testing.assert_close(out.advantages, torch.tensor(a_ref, dtype=torch.float64), atol=ATOL, rtol=0)
    torch.testing.assert_close(out.td_errors, torch.tensor(d_ref, dtype=torch.float64), atol=ATOL, rtol=0)
    expected_rho_bar = torch.where(batch.mask > 0, batch.rho.clamp(max=rho_max), torch.zeros(()))
    torch.testing.assert_close(out.rho_bar, expected_rho_bar.to(torch.float64))


@pytest.mark.parametrize("seed", range(20))
def test_on_policy_full_traces_give_monte_carlo_returns(seed):
    batch = random_step_batch(seed, 5, 7)
    on_policy = torch.where(batch.mask > 0, torch.ones_like(batch.rho), batch.rho)
    out = retrace_targets(
        batch.values,
        batch.rewards,
        batch.dones,
        on_policy,
        batch.mask,
        batch.bootstrap,
        gamma=0.9,
        lam=1.0,
        rho_max=1.0,
        c_max=1.0,
    )
    returns = discounted_returns(batch.rewards, batch.dones, batch.mask, 0.9, batch.bootstrap)
    mc_ref = ref.discounted_returns(
        rows(batch.rewards), rows(batch.dones), rows(batch.mask), 0.9, batch.bootstrap.tolist()
    )
    torch.testing.assert_close(returns, torch.tensor(mc_ref, dtype=torch.float64), atol=ATOL, rtol=0)
    torch.testing.assert_close(out.v_targets, returns, atol=ATOL, rtol=0)
    # On-policy with full traces the advantage is the Monte-Carlo return minus the baseline.
    expected_adv = torch.where(batch.mask > 0, returns - batch.values, torch.zeros(()))
    torch.testing.assert_close(out.advantages, expected_adv.to(torch.float64), atol=ATOL, rtol=0)


@pytest.mark.parametrize("seed", range(20))
def test_lambda_zero_gives_one_step_td_targets(seed):
    batch = random_step_batch(seed, 4, 6)
    on_policy = torch.ones_like(batch.rho)
    out = retrace_targets(
        batch.values,
        batch.rewards,
        batch.dones,
        on_policy,
        batch.mask,
        batch.bootstrap,
        gamma=0.8,
        lam=0.0,
        rho_max=1.0,
        c_max=1.0,
    )
    for b, n in enumerate(batch.lengths):
        for t in range(n):
            next_value = batch.values[b, t + 1] if t + 1 < n else batch.bootstrap[b]
            expected = batch.rewards[b, t] + 0.8 * (1 - batch.dones[b, t]) * next_value
            assert math.isclose(float(out.v_targets[b, t]), float(expected), abs_tol=ATOL)


def test_truncation_caps_hold():
    rho = torch.exp(3 * torch.randn(6, 9, generator=torch.Generator().manual_seed(3)))
    rho_bar, traces = truncate_ratios(rho, rho_max=1.5, c_max=0.8, lam=0.7)
    assert bool((rho_bar <= 1.5).all()) and bool((traces <= 0.7 * 0.8 + 1e-12).all())
    assert bool((rho_bar == torch.minimum(rho, torch.tensor(1.5))).all())
    # Caps bite in the targets: huge ratios act exactly like ratios at the cap.
    batch = random_step_batch(4, 5, 8)
    params = dict(gamma=0.95, lam=1.0, rho_max=2.0, c_max=2.0)
    huge = torch.where(batch.mask > 0, torch.full_like(batch.rho, 1e6), batch.rho)
    capped = torch.where(batch.mask > 0, torch.full_like(batch.rho, 2.0), batch.rho)
    out_huge = retrace_targets(
        batch.values, batch.rewards, batch.dones, huge, batch.mask, batch.bootstrap, **params
    )
    out_cap = retrace_targets(
        batch.values, batch.rewards, batch.dones, capped, batch.mask, batch.bootstrap, **params
    )
    torch.testing.assert_close(out_huge.v_targets, out_cap.v_targets)
    torch.testing.assert_close(out_huge.advantages, out_cap.advantages)
    assert float(out_huge.rho_bar.max()) == 2.0


def test_padding_never_leaks_into_real_steps():
    params = dict(gamma=0.9, lam=0.9, rho_max=1.0, c_max=1.0)
    with_nan = random_step_batch(11, 6, 8, pad_value=float("nan"))
    with_big = random_step_batch(11, 6, 8, pad_value=1e6)
    out_nan, out_big = run_retrace(with_nan, **params), run_retrace(with_big, **params)
    for field in ("v_targets", "advantages", "td_errors", "rho_bar"):
        a, b = getattr(out_nan, field), getattr(out_big, field)
        assert bool(torch.isfinite(a).all()), field
        torch.testing.assert_close(a, b)
        assert bool((a[with_nan.mask == 0] == 0).all()), field


def test_bootstrap_used_only_after_an_unfinished_window():
    values = torch.tensor([[0.5, 0.2, 0.1], [0.5, 0.2, 0.1]], dtype=torch.float64)
    rewards = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    dones = torch.tensor([[0, 0, 1], [0, 0, 0]], dtype=torch.float64)
    mask = torch.ones_like(values)
    rho = torch.ones_like(values)
    params = dict(gamma=0.5, lam=1.0, rho_max=1.0, c_max=1.0)
    low = retrace_targets(values, rewards, dones, rho, mask, torch.tensor([0.0, 0.0]), **params)
    high = retrace_targets(values, rewards, dones, rho, mask, torch.tensor([8.0, 8.0]), **params)
    torch.testing.assert_close(low.v_targets[0], high.v_targets[0])  # the done row ignores the bootstrap
    # The open row: v_2 = 1 + 0.5·8, v_1 = 0.5·v_2, v_0 = 0.5·v_1.
    torch.testing.assert_close(high.v_targets[1], torch.tensor([1.25, 2.5, 5.0], dtype=torch.float64))
    torch.testing.assert_close(low.v_targets[1], torch.tensor([0.25, 0.5, 1.0], dtype=torch.float64))


def test_nothing_crosses_a_done_in_the_middle_of_a_window():
    batch = random_step_batch(21, 1, 6, done_prob=0.0)
    dones = batch.dones.clone()
    dones[0, 2] = 1.0  # episode ends after step 2; steps 3.. belong to the next episode
    params = dict(gamma=0.9, lam=1.0, rho_max=1.0, c_max=1.0)
    base = retrace_targets(
        batch.values, batch.rewards, dones, batch.rho, batch.mask, batch.bootstrap, **params
    )
    later = batch.values.clone(), batch.rewards.clone()
    later[0][0, 3:] += 5.0
    later[1][0, 3:] -= 7.0
    changed = retrace_targets(later[0], later[1], dones, batch.rho, batch.mask, batch.bootstrap + 3, **params)
    torch.testing.assert_close(base.v_targets[0, :3], changed.v_targets[0, :3])
    torch.testing.assert_close(base.advantages[0, :3], changed.advantages[0, :3])
    assert not torch.allclose(base.v_targets[0, 3:], changed.v_targets[0, 3:])


def test_targets_are_detached():
    batch = random_step_batch(5, 3, 4, pad_value=0.0)
    values = batch.values.clone().requires_grad_(True)
    rho = batch.rho.clone().requires_grad_(True)
    out = retrace_targets(
        values,
        batch.rewards,
        batch.dones,
        rho,
        batch.mask,
        batch.bootstrap,
        gamma=0.9,
        lam=0.9,
        rho_max=1.0,
        c_max=1.0,
    )
    assert all(not t.requires_grad for t in out)
    assert not discounted_returns(values, batch.dones, batch.mask, 0.9).requires_grad


def test_low_precision_inputs_are_computed_in_float32():
    batch = random_step_batch(8, 3, 5, pad_value=0.0)
    out = retrace_targets(
        batch.values.to(torch.bfloat16),
        batch.rewards,
        batch.dones,
        batch.rho,
        batch.mask,
        None,
        gamma=0.9,
        lam=0.9,
        rho_max=1.0,
        c_max=1.0,
    )
    assert out.v_targets.dtype == torch.float32


@pytest.mark.parametrize("seed", range(10))
def test_importance_ratios_match_reference_and_clamp(seed):
    gen = torch.Generator().manual_seed(seed)
    logp_pi = -torch.rand(4, 6, generator=gen, dtype=torch.float64) * 40
    logp_mu = -torch.rand(4, 6, generator=gen, dtype=torch.float64) * 40
    mask = (torch.arange(6) < torch.randint(0, 7, (4, 1), generator=gen)).to(torch.float64)
    rho = importance_ratios(logp_pi, logp_mu, mask, max_log_ratio=5.0)
    expected = ref.importance_ratios(rows(logp_pi), rows(logp_mu), rows(mask), 5.0)
    torch.testing.assert_close(rho, torch.tensor(expected, dtype=torch.float64))
    assert float(rho.max()) <= math.exp(5.0) + 1e-9


def test_importance_ratios_survive_minus_infinity_and_are_detached():
    logp_pi = torch.tensor([[-1.0, 0.0]], requires_grad=True)
    logp_mu = torch.tensor([[float("-inf"), 0.0]])
    rho = importance_ratios(logp_pi, logp_mu)
    assert bool(torch.isfinite(rho).all()) and not rho.requires_grad
    assert math.isclose(float(rho[0, 0]), math.exp(20.0), rel_tol=1e-6)


def test_invalid_arguments_name_the_problem():
    batch = random_step_batch(1, 2, 3, pad_value=0.0)
    holey = torch.tensor([[1.0, 0.0, 1.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
    params = dict(gamma=0.9, lam=0.9, rho_max=1.0, c_max=1.0)
    with pytest.raises(ValueError, match="pad at the end"):
        retrace_targets(batch.values, batch.rewards, batch.dones, batch.rho, holey, None, **params)
    with pytest.raises(ValueError, match="same"):
        retrace_targets(
            batch.values[:, :2], batch.rewards, batch.dones, batch.rho, batch.mask, None, **params
        )
    with pytest.raises(ValueError, match="bootstrap_value"):
        retrace_targets(
            batch.values, batch.rewards, batch.dones, batch.rho, batch.mask, torch.zeros(5), **params
        )
    with pytest.raises(ValueError, match="gamma"):
        retrace_targets(
            batch.values, batch.rewards, batch.dones, batch.rho, batch.mask, None, **{**params, "gamma": 1.5}
        )
    with pytest.raises(ValueError, match="lam"):
        retrace_targets(
            batch.values, batch.rewards, batch.dones, batch.rho, batch.mask, None, **{**params, "lam": -0.1}
        )
