"""A-RIDE losses: actor (advantage-weighted log-likelihood with entropy bonus and penalties) and critics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F

from distrl_core.algos.masking import as_step_mask, check_non_negative, masked_mean, zero_padding


class PolicyLoss(NamedTuple):
    """`loss` is the scalar to back-propagate; the other fields are detached parts for logging."""

    loss: torch.Tensor  # () policy_gradient + the ActorTerms
    policy_gradient: torch.Tensor  # () −mean(w_i · A_t · log π_t)
    entropy: torch.Tensor  # () mean entropy over real steps (before the coefficient)
    penalty: (
        torch.Tensor
    )  # () invalid_penalty · mean(invalid · log π) + repeat_penalty · mean(repeat · log π)


def _row_weights(is_weights: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """(B,) importance-sampling weights -> (B, 1) detached, broadcastable over T; ones when None."""
    if is_weights is None:
        return torch.ones((like.shape[0], 1), dtype=like.dtype, device=like.device)
    if tuple(is_weights.shape) != (like.shape[0],):
        raise ValueError(
            f"is_weights has shape {tuple(is_weights.shape)}; "
            f"pass one weight per trajectory, shape ({like.shape[0]},)"
        )
    return is_weights.detach().to(like.dtype).unsqueeze(1)


def flag_mean(flags: torch.Tensor | None, logp: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """mean over real steps of flag_t · log π_t (0 when no flags are given)."""
    if flags is None:
        return logp.new_zeros(())
    if flags.shape != logp.shape:
        raise ValueError(f"penalty flags have shape {tuple(flags.shape)}; expected {tuple(logp.shape)}")
    flagged = real & (flags > 0)
    zero = torch.zeros((), dtype=logp.dtype, device=logp.device)
    return torch.where(flagged, logp, zero).sum() / real.sum().clamp(min=1).to(logp.dtype)


@dataclass(frozen=True)
class ActorTerms:
    """What every actor loss (`policy_loss`, `clipped_policy_loss`, `decoupled_ppo_loss`) adds to its
    policy gradient, the one place their arguments live:

        − entropy_coef · mean(H_t) + invalid_penalty · mean(invalid_t · log π_t)
                                   + repeat_penalty · mean(repeat_t · log π_t)

    means over real steps. The penalties act like a fixed extra advantage of −κ on flagged steps:
    minimising κ · log π lowers the probability of invalid and repeated actions. They are not
    IS-weighted (a bad action is bad whichever replay priority brought it in). The coefficients
    must be >= 0."""

    entropy: torch.Tensor | None = None  # (B, T) entropy of π at each step, with gradient; None = no bonus
    invalid: torch.Tensor | None = None  # (B, T) 1 where the action failed to parse / was invalid
    repeat: torch.Tensor | None = None  # (B, T) 1 where the action repeated the previous one
    entropy_coef: float = 0.0
    invalid_penalty: float = 0.0
    repeat_penalty: float = 0.0

    def __post_init__(self) -> None:
        for name in ("entropy_coef", "invalid_penalty", "repeat_penalty"):
            check_non_negative(name, getattr(self, name))


def add_actor_terms(
    policy_gradient: torch.Tensor,  # () the loss's own term
    logp_pi: torch.Tensor,  # (B, T) the policy's log-probs, for the shapes
    logp: torch.Tensor,  # (B, T) the same with the padding zeroed
    real: torch.Tensor,  # (B, T) bool
    terms: ActorTerms | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss, mean entropy over real steps, penalty): `policy_gradient` plus `terms`; the entropy
    and the penalty detached, for the metrics."""
    terms = terms or ActorTerms()
    if terms.entropy is None:
        mean_entropy = logp_pi.new_zeros(())
    else:
        if terms.entropy.shape != logp_pi.shape:
            raise ValueError(
                f"entropy has shape {tuple(terms.entropy.shape)}; expected {tuple(logp_pi.shape)}"
            )
        mean_entropy = masked_mean(terms.entropy, real)
    penalty = terms.invalid_penalty * flag_mean(terms.invalid, logp, real) + terms.repeat_penalty * flag_mean(
        terms.repeat, logp, real
    )
    loss = policy_gradient - terms.entropy_coef * mean_entropy + penalty
    return loss, mean_entropy.detach(), penalty.detach()


def policy_loss(
    logp_pi: torch.Tensor,  # (B, T) log π(a_t|s_t) of the stored action, with gradient
    advantages: torch.Tensor,  # (B, T) A_t (detached here whatever the caller passes)
    is_weights: torch.Tensor | None,  # (B,) prioritized-replay IS weights w_i; None = 1
    mask: torch.Tensor,  # (B, T) 1 = real step
    terms: ActorTerms | None = None,  # entropy bonus and penalties; None = neither
) -> PolicyLoss:
    """loss = −mean(w_i · A_t · log π_t) + the `ActorTerms`

    Every mean is over the batch's real steps (so padded steps and short rows carry no weight). The
    same penalties may also be in the reward; the terms push directly, without waiting for the
    critic to learn them.
    """
    if logp_pi.shape != advantages.shape:
        raise ValueError(
            f"logp_pi {tuple(logp_pi.shape)} and advantages {tuple(advantages.shape)} must match"
        )
    real = as_step_mask(mask, logp_pi.shape)
    # Zero the padding before multiplying: a NaN there times a zero gradient would still be NaN.
    logp = zero_padding(logp_pi, real)
    weighted_advantage = _row_weights(is_weights, logp) * zero_padding(
        advantages.detach().to(logp.dtype), real
    )
    pg = -masked_mean(weighted_advantage * logp, real)
    loss, mean_entropy, penalty = add_actor_terms(pg, logp_pi, logp, real, terms)
    return PolicyLoss(loss, pg.detach(), mean_entropy, penalty)


def critic_loss(
    values: torch.Tensor,  # (B, T) V(s_t), with gradient
    targets: torch.Tensor,  # (B, T) v_t (detached here)
    mask: torch.Tensor,  # (B, T)
    is_weights: torch.Tensor | None = None,  # (B,)
) -> torch.Tensor:  # ()
    """0.5 · mean over real steps of w_i · (V(s_t) − v_t)²; the 0.5 makes the gradient w_i · (V − v)."""
    if values.shape != targets.shape:
        raise ValueError(f"values {tuple(values.shape)} and targets {tuple(targets.shape)} must match")
    real = as_step_mask(mask, values.shape)
    error = zero_padding(values, real) - zero_padding(targets.detach().to(values.dtype), real)
    return 0.5 * masked_mean(_row_weights(is_weights, values) * error.square(), real)


def trajectory_critic_loss(
    logits: torch.Tensor,  # (B,) logit of P(success | instruction)
    success: torch.Tensor,  # (B,) 1 = the episode succeeded
    weights: torch.Tensor | None = None,  # (B,) optional per-trajectory weights (e.g. IS weights)
) -> torch.Tensor:  # ()
    """Binary cross-entropy with logits between V_traj(instruction) and the episode's success, averaged."""
    if logits.shape != success.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and success {tuple(success.shape)} must match")
    weight = None if weights is None else weights.detach().to(logits.dtype)
    return F.binary_cross_entropy_with_logits(logits, success.detach().to(logits.dtype), weight=weight)
