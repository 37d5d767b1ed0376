"""DPER trajectory priorities, prioritized-replay importance-sampling weights, and linear annealing."""

from __future__ import annotations

import torch

from distrl_core.algos.masking import (
    as_step_mask,
    check_non_negative,
    check_probability,
    check_same_shape,
    masked_row_mean,
)


def dper_priority(
    td_errors: torch.Tensor,  # (B, T) δ_t from `retrace_targets`
    rho_bar: torch.Tensor,  # (B, T) truncated ratios ρ̄_t
    entropy: torch.Tensor,  # (B, T) policy entropy per step
    mask: torch.Tensor,  # (B, T) 1 = real step
    *,
    w1: float,
    w2: float,
    w3: float,
    eps: float,
) -> torch.Tensor:  # (B,) detached
    """p_i = w1 · mean_t |δ_t| + w2 · mean_t ρ̄_t + w3 · mean_t H_t + ε, means over each row's real steps.

    A row with no real step gets ε. ε > 0 keeps every trajectory sampleable.
    """
    shape = check_same_shape(td_errors=td_errors, rho_bar=rho_bar, entropy=entropy)
    real = as_step_mask(mask, shape)
    for name, weight in (("w1", w1), ("w2", w2), ("w3", w3)):
        check_non_negative(name, weight)
    if not eps > 0:
        raise ValueError(f"eps={eps} must be > 0, or a trajectory with zero priority could never be sampled")
    with torch.no_grad():
        return (
            w1 * masked_row_mean(td_errors.detach().abs(), real)
            + w2 * masked_row_mean(rho_bar.detach(), real)
            + w3 * masked_row_mean(entropy.detach(), real)
            + eps
        )


def importance_weights(
    probabilities: torch.Tensor,  # (B,) P(i): the probability with which each sampled trajectory was drawn
    n: int,  # N: number of trajectories in the replay when sampling
    beta: float,  # β in [0, 1], annealed to 1 over training
    min_probability: float | None = None,  # smallest P over the whole replay, if known
) -> torch.Tensor:  # (B,) detached, in (0, 1]
    """w_i = (N · P(i))^(−β) / max_w.

    max_w is the largest weight in the batch by default (so the batch's max weight is exactly 1), or the
    largest possible weight (N · min_probability)^(−β) when `min_probability` is given (weights stay
    comparable across batches). Computed in log space so tiny probabilities do not overflow.
    """
    if probabilities.ndim != 1:
        raise ValueError(f"probabilities must be (B,), got shape {tuple(probabilities.shape)}")
    if n < 1:
        raise ValueError(f"n={n}: the replay must hold at least one trajectory")
    check_probability("beta", beta)
    with torch.no_grad():
        p = probabilities.detach().to(torch.promote_types(probabilities.dtype, torch.float64))
        if not bool(((p > 0) & (p <= 1)).all()):
            raise ValueError(
                "probabilities must be in (0, 1]; a sampled item always has positive probability"
            )
        log_w = -beta * torch.log(n * p)
        if min_probability is None:
            log_max = log_w.max()
        else:
            check_probability("min_probability", min_probability, allow_zero=False)
            if bool((p < min_probability).any()):
                raise ValueError("a probability is below min_probability; pass the replay's true minimum")
            log_max = -beta * torch.log(torch.tensor(n * min_probability, dtype=p.dtype))
        return torch.exp(log_w - log_max).to(probabilities.dtype)


def linear_schedule(start: float, end: float, steps: int, t: int | float) -> float:
    """start + (end − start) · clamp(t / steps, 0, 1): e.g. β from 0.4 to 1 over `steps` updates."""
    if steps <= 0:
        return float(end)
    fraction = min(max(t / steps, 0.0), 1.0)
    return float(start + (end - start) * fraction)
