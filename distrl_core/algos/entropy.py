"""Exact policy entropies: over generated tokens (generative policies) and over candidates (scoring)."""

from __future__ import annotations

from typing import Literal

import torch


def token_entropy(
    logits: torch.Tensor,  # (..., L, V) the policy's logits at each of the action's L token positions
    token_mask: torch.Tensor,  # (..., L) 1 = a generated token of the action, 0 = prompt/padding
    reduction: Literal["sum", "mean"] = "sum",
) -> torch.Tensor:  # (...) e.g. (B, T) for logits (B, T, L, V)
    """Entropy of π over each action's tokens: H_l = −Σ_v p_l(v) log p_l(v) at every generated position l,
    then summed over the action's tokens ("sum", the default) or averaged over them ("mean").

    The sum is the chain-rule entropy of the action sequence along the sampled prefix, on the same scale as
    log π summed over the action's tokens (what the collectors store); "mean" is per token, to pair with
    per-token-normalised log-probs. This is the true entropy of the distribution, not the surprisal −log π of
    the sampled token (which is what DistRL's public code uses). Computed in float32 at least, with the
    gradient kept (the entropy bonus needs it). Logits of −inf (a masked vocabulary) are fine. An action with
    no tokens has entropy 0.
    """
    if logits.shape[:-1] != token_mask.shape:
        raise ValueError(
            f"token_mask has shape {tuple(token_mask.shape)}; expected the logits' shape without the "
            f"vocabulary axis, {tuple(logits.shape[:-1])}"
        )
    if reduction not in ("sum", "mean"):
        raise ValueError(f"reduction={reduction!r}; use 'sum' or 'mean'")
    log_p = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
    # p·log p is 0 where p is 0; clamping log p (exp(−1e4) is 0 in any float) keeps 0·(−inf) = NaN out of
    # the value and the gradient.
    per_token = -(log_p.exp() * log_p.clamp(min=-1e4)).sum(dim=-1)  # (..., L)
    valid = token_mask > 0
    per_token = torch.where(valid, per_token, torch.zeros((), dtype=per_token.dtype, device=per_token.device))
    total = per_token.sum(dim=-1)
    if reduction == "sum":
        return total
    return total / valid.sum(dim=-1).clamp(min=1).to(total.dtype)


def candidate_log_probs(
    scores: torch.Tensor,  # (..., K) a score (logit) per candidate action
    cand_mask: torch.Tensor,  # (..., K) 1 = a real candidate, 0 = padding
) -> torch.Tensor:  # (..., K)
    """log softmax over the valid candidates only; padded candidates get −inf (a row with none: all −inf)."""
    if scores.shape != cand_mask.shape:
        raise ValueError(f"scores {tuple(scores.shape)} and cand_mask {tuple(cand_mask.shape)} must match")
    valid = cand_mask > 0
    has_any = valid.any(dim=-1, keepdim=True)
    # A row without candidates is normalised over all its entries (no NaN anywhere), then blanked.
    usable = valid | ~has_any
    masked = scores.masked_fill(~usable, float("-inf"))
    log_p = torch.log_softmax(masked.to(torch.promote_types(scores.dtype, torch.float32)), dim=-1)
    return log_p.masked_fill(~valid, float("-inf"))


def candidate_entropy(
    scores: torch.Tensor,  # (..., K) candidate scores, or log-probs (re-normalising them changes nothing)
    cand_mask: torch.Tensor,  # (..., K) 1 = a real candidate
) -> torch.Tensor:  # (...)
    """Exact entropy −Σ_k p_k log p_k of the softmax over the valid candidates (0 for a row with none)."""
    log_p = candidate_log_probs(scores, cand_mask)
    valid = cand_mask > 0
    safe_log_p = log_p.masked_fill(~valid, 0.0)
    return -(safe_log_p.exp() * safe_log_p).masked_fill(~valid, 0.0).sum(dim=-1)
