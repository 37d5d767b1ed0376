"""Critic-free group-relative advantages in the style of GiGPO (Feng et al. 2025, "Group-in-Group Policy
Optimization", the verl-agent paper) and the clipped-ratio policy loss they feed.

Two levels of groups, both given as integer ids (any values; equal id = same group):

- episode groups (B,): episodes of the same task from the same start state. The episode advantage is
  A^E(τ_i) = (R(τ_i) − mean_j R(τ_j)) / (std_j R(τ_j) + ε), or R(τ_i) − mean_j R(τ_j) without the std.
- step groups (B, T): steps whose observation is identical ("anchor states") across the episodes of one
  episode group. Each step's discounted return G_t = Σ_k γ^k r_{t+k} (to the end of its episode) is
  normalised within its step group the same way, giving A^S.

A step's advantage is A = A^E + ω · A^S. The std is the sample standard deviation (Bessel-corrected, as
``torch.std``); a group with a single member has no peer to compare with and contributes 0 (so a
singleton step group adds nothing beyond A^E, and a singleton episode group nothing at all).
Rows without real steps belong to no group.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from distrl_core.algos.losses import ActorTerms, add_actor_terms
from distrl_core.algos.masking import (
    as_step_mask,
    check_non_negative,
    check_probability,
    check_same_shape,
    compute_dtype,
    masked_mean,
    require_left_aligned,
    zero_padding,
)
from distrl_core.algos.ratios import DEFAULT_MAX_LOG_RATIO
from distrl_core.algos.retrace import discounted_returns

__all__ = ["ClippedLoss", "GroupAdvantages", "clipped_policy_loss", "gigpo_advantages", "group_normalize"]


class GroupAdvantages(NamedTuple):
    advantages: torch.Tensor  # (B, T) A^E + ω·A^S, 0 at padding
    episode: torch.Tensor  # (B,) A^E
    step: torch.Tensor  # (B, T) A^S, 0 at padding and in singleton step groups
    returns: torch.Tensor  # (B, T) G_t
    singleton_step_fraction: torch.Tensor  # () share of real steps whose step group is a singleton


class ClippedLoss(NamedTuple):
    """`loss` is the scalar to back-propagate; the other fields are detached parts for logging."""

    loss: torch.Tensor  # () policy_gradient + the ActorTerms
    policy_gradient: torch.Tensor  # () −mean(min(r·A, clip(r)·A))
    entropy: torch.Tensor  # ()
    penalty: torch.Tensor  # ()
    clip_fraction: torch.Tensor  # () share of real steps where the clipped term was the smaller one


def group_normalize(
    x: torch.Tensor,  # (N,) values to compare within groups
    group_ids: torch.Tensor,  # (N,) int, equal id = same group
    valid: torch.Tensor,  # (N,) bool, False = belongs to no group
    *,
    use_std: bool = True,
    eps: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor]:  # (N,) normalised, 0 where invalid or alone; (N,) group sizes
    """(x_i − mean_g) / (std_g + ε) within each group g (or x_i − mean_g without the std)."""
    if x.ndim != 1 or x.shape != group_ids.shape or x.shape != valid.shape:
        raise ValueError(
            f"x {tuple(x.shape)}, group_ids {tuple(group_ids.shape)} and valid {tuple(valid.shape)} "
            "must all be (N,)"
        )
    check_non_negative("eps", eps)
    zero = torch.zeros((), dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return x.clone(), torch.zeros_like(group_ids)
    _, dense = torch.unique(group_ids, return_inverse=True)  # (N,) ids 0..G-1
    weights = valid.to(x.dtype)
    values = torch.where(valid, x, zero)  # NaN outside the groups must not reach the sums
    groups = int(dense.max()) + 1
    count = torch.zeros(groups, dtype=x.dtype, device=x.device).index_add_(0, dense, weights)
    total = torch.zeros_like(count).index_add_(0, dense, values)
    mean = total / count.clamp(min=1)
    centred = torch.where(valid, values - mean[dense], zero)
    result = centred
    if use_std:
        square = torch.zeros_like(count).index_add_(0, dense, centred.square())
        scale = torch.sqrt(square / (count - 1).clamp(min=1))[dense] + eps
        # A group of equal values (std 0) with eps = 0: every centred value is 0 already.
        result = torch.where(scale > 0, centred / scale.clamp(min=torch.finfo(x.dtype).tiny), zero)
    size = count[dense]
    return torch.where(valid & (size > 1), result, zero), torch.where(valid, size, zero)


def gigpo_advantages(
    rewards: torch.Tensor,  # (B, T)
    dones: torch.Tensor,  # (B, T) 1 = the episode ended after this step
    mask: torch.Tensor,  # (B, T) real steps first; each row one whole episode
    episode_groups: torch.Tensor,  # (B,) int: same task and start state
    step_groups: torch.Tensor,  # (B, T) int: same episode group and same observation
    *,
    gamma: float,
    omega: float = 1.0,
    use_std: bool = True,
    eps: float = 1e-6,
) -> GroupAdvantages:  # all detached
    """A = A^E + ω·A^S (module docstring). R(τ) is the undiscounted sum of the row's rewards; G_t
    is `discounted_returns` with no bootstrap (rows are whole episodes: no value to bootstrap from)."""
    shape = check_same_shape(rewards=rewards, dones=dones, step_groups=step_groups)
    real = as_step_mask(mask, shape)
    require_left_aligned(real)
    check_probability("gamma", gamma)
    check_non_negative("omega", omega)
    if tuple(episode_groups.shape) != (shape[0],):
        raise ValueError(
            f"episode_groups has shape {tuple(episode_groups.shape)}; pass one group id per row, ({shape[0]},)"
        )
    with torch.no_grad():
        dtype = compute_dtype(rewards)
        rewards_ = zero_padding(rewards.detach().to(dtype), real)
        has_steps = real.any(dim=1)  # (B,)
        episode, _ = group_normalize(
            rewards_.sum(dim=1), episode_groups, has_steps, use_std=use_std, eps=eps
        )  # (B,)
        returns = discounted_returns(rewards_, dones.detach().to(dtype), real, gamma)  # (B, T)
        # Step groups never span episode groups: pair the ids before grouping.
        pairs = torch.stack([episode_groups.unsqueeze(1).expand(shape), step_groups], dim=-1).reshape(-1, 2)
        _, keys = torch.unique(pairs, dim=0, return_inverse=True)
        step_flat, sizes = group_normalize(
            returns.reshape(-1), keys, real.reshape(-1), use_std=use_std, eps=eps
        )
        step = step_flat.reshape(shape)  # (B, T)
        zero = torch.zeros((), dtype=dtype, device=rewards.device)
        advantages = torch.where(real, episode.unsqueeze(1) + omega * step, zero)
        singletons = masked_mean((sizes.reshape(shape) == 1).to(dtype), real)
    return GroupAdvantages(advantages, episode, step, returns, singletons)


def clipped_surrogate(
    ratio: torch.Tensor,  # (B, T) π/μ (or π_θ/π_prox), with gradient
    advantages: torch.Tensor,  # (B, T) detached
    clip_eps: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T) PPO's min(r·A, clip(r, 1 − ε, 1 + ε)·A), and (B, T) bool where the clipped term was
    the smaller one (for the clip fraction)."""
    unclipped = ratio * advantages
    clipped = ratio.clamp(1 - clip_eps, 1 + clip_eps) * advantages
    return torch.minimum(unclipped, clipped), clipped.detach() < unclipped.detach()


def clipped_policy_loss(
    logp_pi: torch.Tensor,  # (B, T) log π(a_t|s_t), with gradient
    logp_mu: torch.Tensor,  # (B, T) log μ(a_t|s_t) of the policy that acted
    advantages: torch.Tensor,  # (B, T) detached here
    mask: torch.Tensor,  # (B, T) 1 = real step
    *,
    clip_eps: float,
    terms: ActorTerms | None = None,  # entropy bonus and penalties; None = neither
    max_log_ratio: float = DEFAULT_MAX_LOG_RATIO,
) -> ClippedLoss:
    """PPO's clipped surrogate with r_t = π/μ = exp(clamp(log π − log μ, ±max_log_ratio)):

        loss = −mean_t min(r_t · A_t, clip(r_t, 1 − ε, 1 + ε) · A_t) + the `ActorTerms`

    means over real steps.
    """
    shape = check_same_shape(logp_pi=logp_pi, logp_mu=logp_mu, advantages=advantages)
    check_probability("clip_eps", clip_eps)
    real = as_step_mask(mask, shape)
    logp = zero_padding(logp_pi, real)
    log_ratio = (logp - zero_padding(logp_mu.detach().to(logp.dtype), real)).clamp(
        -max_log_ratio, max_log_ratio
    )
    ratio = torch.exp(log_ratio)  # 1 at padding
    adv = zero_padding(advantages.detach().to(logp.dtype), real)
    surrogate, clipped_smaller = clipped_surrogate(ratio, adv, clip_eps)
    pg = -masked_mean(surrogate, real)
    loss, mean_entropy, penalty = add_actor_terms(pg, logp_pi, logp, real, terms)
    clip_fraction = masked_mean(clipped_smaller.to(logp.dtype), real)
    return ClippedLoss(loss, pg.detach(), mean_entropy, penalty, clip_fraction)
