"""Importance ratios between the learner's policy π and the collectors' behaviour policy μ."""

from __future__ import annotations

import torch

from distrl_core.algos.masking import as_step_mask, check_non_negative

# exp(20) ≈ 4.9e8: any ratio that large is truncated by ρ_max / c_max anyway, and clamping the
# log-difference first keeps exp() finite even when log μ is -inf or absurdly small.
DEFAULT_MAX_LOG_RATIO = 20.0


def importance_ratios(
    logp_pi: torch.Tensor,  # (B, T) log π(a_t | s_t), summed over the action's tokens
    logp_mu: torch.Tensor,  # (B, T) log μ(a_t | s_t) stored by the collector
    mask: torch.Tensor | None = None,  # (B, T) 1 = real step
    max_log_ratio: float = DEFAULT_MAX_LOG_RATIO,
) -> torch.Tensor:  # (B, T)
    """ρ_t = exp(clamp(log π_t − log μ_t, −max_log_ratio, max_log_ratio)); 0 at padded steps.

    The result is detached: Retrace/V-trace treat the ratios as constants that weight the targets and the
    advantage; the policy gradient flows through log π in `policy_loss` instead.
    """
    if logp_pi.shape != logp_mu.shape:
        raise ValueError(f"logp_pi {tuple(logp_pi.shape)} and logp_mu {tuple(logp_mu.shape)} must match")
    check_non_negative("max_log_ratio", max_log_ratio)
    log_ratio = (logp_pi.detach() - logp_mu.detach()).clamp(-max_log_ratio, max_log_ratio)
    # nan_to_num: a NaN log-prob (e.g. garbage in padding) must not survive into the ratio.
    rho = torch.exp(torch.nan_to_num(log_ratio, nan=0.0))
    if mask is None:
        return rho
    return torch.where(
        as_step_mask(mask, rho.shape), rho, torch.zeros((), dtype=rho.dtype, device=rho.device)
    )


def truncate_ratios(
    rho: torch.Tensor,  # (B, T)
    *,
    rho_max: float,
    c_max: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:  # ρ̄ (B, T), c (B, T)
    """ρ̄_t = min(ρ_max, ρ_t) and traces c_t = λ · min(c_max, ρ_t) (both detached)."""
    check_non_negative("rho_max", rho_max)
    check_non_negative("c_max", c_max)
    if not 0 <= lam <= 1:
        raise ValueError(f"lam={lam} is outside [0, 1]; λ = 0 is one-step TD, λ = 1 full Retrace traces")
    rho = rho.detach()
    return rho.clamp(max=rho_max), lam * rho.clamp(max=c_max)
