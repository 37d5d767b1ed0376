"""Retrace / V-trace value targets and advantages, and plain discounted returns (docs/architecture.md,
"The learner's loss").

All recursions run backwards over T with vector operations over B, on padded (B, T) batches whose real
steps form a prefix of each row. A window may span episodes: a step with done = 1 ends its episode, so
nothing (value, trace, return) crosses it. The last real step of a row that is not done continues past the
window: its successor's value is `bootstrap_value` (the critic's value of the state after the window).
Outputs are 0 at padded steps, and padding (even NaN) never leaks into real steps.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from distrl_core.algos.masking import (
    as_step_mask,
    check_bootstrap,
    check_same_shape,
    compute_dtype,
    require_left_aligned,
)
from distrl_core.algos.ratios import truncate_ratios


class RetraceTargets(NamedTuple):
    """What `retrace_targets` returns; every field is (B, T), detached, and 0 at padded steps."""

    v_targets: torch.Tensor  # v_t: the critic's regression target
    advantages: torch.Tensor  # A_t = ρ̄_t (r_t + γ(1−done_t) v_{t+1} − V(s_t))
    td_errors: torch.Tensor  # δ_t = r_t + γ(1−done_t) V(s_{t+1}) − V(s_t), not weighted by ρ̄ (DPER uses |δ|)
    rho_bar: torch.Tensor  # ρ̄_t = min(ρ_max, ρ_t) (DPER uses its mean)


def _successor(x: torch.Tensor, real: torch.Tensor, t: int, fallback: torch.Tensor) -> torch.Tensor:
    """x[:, t+1] where step t+1 is real, else `fallback` (the bootstrap): (B,)."""
    if t + 1 >= x.shape[1]:
        return fallback
    return torch.where(real[:, t + 1], x[:, t + 1], fallback)


def retrace_targets(
    values: torch.Tensor,  # (B, T) V(s_t) from the critic
    rewards: torch.Tensor,  # (B, T) r_t
    dones: torch.Tensor,  # (B, T) 1 where the episode ended after step t
    rho: torch.Tensor,  # (B, T) importance ratios π/μ (see `importance_ratios`)
    mask: torch.Tensor,  # (B, T) 1 = real step; real steps first in each row
    bootstrap_value: torch.Tensor | None = None,  # (B,) V(state after the window); None = 0
    *,
    gamma: float,
    lam: float,
    rho_max: float,
    c_max: float,
) -> RetraceTargets:
    """Off-policy corrected targets, computed backwards with ρ̄_t = min(ρ_max, ρ_t), c_t = λ·min(c_max, ρ_t):

        δ_t = r_t + γ(1−done_t) V(s_{t+1}) − V(s_t)
        v_t = V(s_t) + ρ̄_t δ_t + γ(1−done_t) c_t (v_{t+1} − V(s_{t+1}))
        A_t = ρ̄_t (r_t + γ(1−done_t) v_{t+1} − V(s_t))

    After the last real step of a row, V(s_{t+1}) = v_{t+1} = bootstrap_value. The outputs are computed under
    no_grad (stop-gradient targets): the critic regresses on v_t, the actor is weighted by A_t, and neither
    pushes gradients into the other. On-policy (ρ = 1) with λ = 1 and ρ_max, c_max ≥ 1, v_t is the discounted
    Monte-Carlo return bootstrapped from `bootstrap_value`; with λ = 0, v_t = r_t + γ(1−done_t) V(s_{t+1}).
    """
    shape = check_same_shape(values=values, rewards=rewards, dones=dones, rho=rho)
    real = as_step_mask(mask, shape)
    require_left_aligned(real)
    if not 0 <= gamma <= 1:
        raise ValueError(f"gamma={gamma} is outside [0, 1]")
    with torch.no_grad():
        dtype = compute_dtype(values)
        values_, rewards_ = values.detach().to(dtype), rewards.detach().to(dtype)
        continues = 1.0 - dones.detach().to(dtype)
        rho_bar, traces = truncate_ratios(rho.to(dtype), rho_max=rho_max, c_max=c_max, lam=lam)
        bootstrap = check_bootstrap(bootstrap_value, values_)
        zero = torch.zeros((), dtype=dtype, device=values.device)

        v_targets = torch.zeros_like(values_)
        advantages = torch.zeros_like(values_)
        td_errors = torch.zeros_like(values_)
        for t in reversed(range(shape[1])):
            next_value = _successor(values_, real, t, bootstrap)
            next_target = _successor(v_targets, real, t, bootstrap)
            discount = gamma * continues[:, t]
            delta = rewards_[:, t] + discount * next_value - values_[:, t]
            target = (
                values_[:, t] + rho_bar[:, t] * delta + discount * traces[:, t] * (next_target - next_value)
            )
            advantage = rho_bar[:, t] * (rewards_[:, t] + discount * next_target - values_[:, t])
            is_real = real[:, t]
            v_targets[:, t] = torch.where(is_real, target, zero)
            advantages[:, t] = torch.where(is_real, advantage, zero)
            td_errors[:, t] = torch.where(is_real, delta, zero)
        rho_bar = torch.where(real, rho_bar, zero)
    return RetraceTargets(v_targets, advantages, td_errors, rho_bar)


def discounted_returns(
    rewards: torch.Tensor,  # (B, T)
    dones: torch.Tensor,  # (B, T)
    mask: torch.Tensor,  # (B, T) real steps first in each row
    gamma: float,
    bootstrap_value: torch.Tensor | None = None,  # (B,) value after the window; None = 0
) -> torch.Tensor:  # (B, T), detached, 0 at padding
    """Monte-Carlo returns G_t = r_t + γ(1−done_t) G_{t+1}; G after a row's last real step = bootstrap."""
    shape = check_same_shape(rewards=rewards, dones=dones)
    real = as_step_mask(mask, shape)
    require_left_aligned(real)
    if not 0 <= gamma <= 1:
        raise ValueError(f"gamma={gamma} is outside [0, 1]")
    with torch.no_grad():
        dtype = compute_dtype(rewards)
        rewards_ = rewards.detach().to(dtype)
        continues = 1.0 - dones.detach().to(dtype)
        bootstrap = check_bootstrap(bootstrap_value, rewards_)
        zero = torch.zeros((), dtype=dtype, device=rewards.device)
        returns = torch.zeros_like(rewards_)
        for t in reversed(range(shape[1])):
            following = _successor(returns, real, t, bootstrap)
            value = rewards_[:, t] + gamma * continues[:, t] * following
            returns[:, t] = torch.where(real[:, t], value, zero)
    return returns
