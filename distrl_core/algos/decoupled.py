"""Decoupled PPO (AReaL, Fu et al. 2025, "AReaL: A Large-Scale Asynchronous Reinforcement Learning
System for Language Reasoning"): PPO for data from stale behaviour policies.

Three policies enter: μ acted (its log-probs are stored with the step), π_prox is a recent snapshot of
the learner (the trust region's centre) and π_θ is trained. The ratio that is clipped is taken against
π_prox, not μ, so the trust region no longer shrinks to nothing when μ is many versions old; the gap
between μ and π_prox is corrected by a truncated importance weight instead:

    w_t = min(π_prox(a_t|s_t) / μ(a_t|s_t), w̄)         (detached)
    r_t = π_θ(a_t|s_t) / π_prox(a_t|s_t)
    L   = −mean_t w_t · min(r_t · A_t, clip(r_t, 1 − ε, 1 + ε) · A_t) + the `ActorTerms`

means over real steps (the entropy bonus and penalties of every actor loss, `algos.losses`). With π_prox = μ (on-policy data)
w = 1 and L is PPO's clipped loss.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from distrl_core.algos.group import clipped_surrogate
from distrl_core.algos.losses import ActorTerms, add_actor_terms
from distrl_core.algos.masking import (
    as_step_mask,
    check_probability,
    check_same_shape,
    masked_mean,
    zero_padding,
)
from distrl_core.algos.ratios import DEFAULT_MAX_LOG_RATIO

__all__ = ["DecoupledLoss", "decoupled_ppo_loss"]


class DecoupledLoss(NamedTuple):
    """`loss` is the scalar to back-propagate; the other fields are detached parts for logging."""

    loss: torch.Tensor  # ()
    policy_gradient: torch.Tensor  # () −mean(w · min(r·A, clip(r)·A))
    entropy: torch.Tensor  # ()
    penalty: torch.Tensor  # ()
    clip_fraction: torch.Tensor  # () share of real steps where the clipped term was the smaller one
    behaviour_weight_mean: torch.Tensor  # () mean w over real steps
    truncated_fraction: torch.Tensor  # () share of real steps where π_prox/μ exceeded w̄


def decoupled_ppo_loss(
    logp_pi: torch.Tensor,  # (B, T) log π_θ(a_t|s_t), with gradient
    logp_prox: torch.Tensor,  # (B, T) log π_prox(a_t|s_t), detached here
    logp_mu: torch.Tensor,  # (B, T) log μ(a_t|s_t) of the policy that acted
    advantages: torch.Tensor,  # (B, T) detached here
    mask: torch.Tensor,  # (B, T) 1 = real step
    *,
    clip_eps: float,
    weight_max: float,
    terms: ActorTerms | None = None,  # entropy bonus and penalties; None = neither
    max_log_ratio: float = DEFAULT_MAX_LOG_RATIO,
) -> DecoupledLoss:
    """The module docstring's L; w̄ = ``weight_max``; log-ratios are clamped to ±``max_log_ratio``
    before exp (as `importance_ratios`)."""
    shape = check_same_shape(logp_pi=logp_pi, logp_prox=logp_prox, logp_mu=logp_mu, advantages=advantages)
    check_probability("clip_eps", clip_eps)
    if not weight_max > 0:
        raise ValueError(f"weight_max={weight_max} must be > 0 (the truncation of π_prox/μ)")
    real = as_step_mask(mask, shape)
    logp = zero_padding(logp_pi, real)
    prox = zero_padding(logp_prox.detach().to(logp.dtype), real)
    mu = zero_padding(logp_mu.detach().to(logp.dtype), real)
    behaviour = torch.exp((prox - mu).clamp(-max_log_ratio, max_log_ratio))  # (B, T) π_prox/μ
    weight = behaviour.clamp(max=weight_max)  # 1 at padding
    ratio = torch.exp((logp - prox).clamp(-max_log_ratio, max_log_ratio))  # (B, T) π_θ/π_prox
    adv = zero_padding(advantages.detach().to(logp.dtype), real)
    surrogate, clipped_smaller = clipped_surrogate(ratio, adv, clip_eps)
    pg = -masked_mean(weight * surrogate, real)
    loss, mean_entropy, penalty = add_actor_terms(pg, logp_pi, logp, real, terms)
    dtype = logp.dtype
    return DecoupledLoss(
        loss=loss,
        policy_gradient=pg.detach(),
        entropy=mean_entropy,
        penalty=penalty,
        clip_fraction=masked_mean(clipped_smaller.to(dtype), real),
        behaviour_weight_mean=masked_mean(weight, real),
        truncated_fraction=masked_mean((behaviour > weight_max).to(dtype), real),
    )
