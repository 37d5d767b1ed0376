"""Helpers for padded (B, T) batches: a boolean mask marks real steps, padding is ignored everywhere."""

from __future__ import annotations

import torch


def as_step_mask(mask: torch.Tensor, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
    """Return `mask` as a bool tensor of `shape` (True = real step); raise if the shapes disagree."""
    if tuple(mask.shape) != tuple(shape):
        raise ValueError(
            f"mask has shape {tuple(mask.shape)} but the data has shape {tuple(shape)}; "
            "pass one mask entry per step (1 = real step, 0 = padding)"
        )
    return mask if mask.dtype == torch.bool else mask > 0


def require_left_aligned(mask: torch.Tensor) -> None:
    """Raise unless every row's real steps form a prefix (padding only at the end of a row).

    Recursions that look at "the next step" need this: a hole in the middle of a row would make the
    step before the hole bootstrap from the wrong state.
    """
    if mask.shape[-1] > 1 and bool((mask[..., 1:] & ~mask[..., :-1]).any()):
        raise ValueError(
            "mask has a real step after a padded one; put each row's real steps first and pad at the end"
        )


def zero_padding(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """`x` with padded entries replaced by 0 (their gradient is 0 too, even if they held NaN)."""
    return torch.where(mask, x, torch.zeros((), dtype=x.dtype, device=x.device))


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of `x` over the entries where `mask` is True (0 when there are none).

    `torch.where` rather than a product, so NaN or inf in padding never reaches the result or its gradient.
    """
    mask = as_step_mask(mask, x.shape)
    total = torch.where(mask, x, torch.zeros((), dtype=x.dtype, device=x.device)).sum()
    return total / mask.sum().clamp(min=1).to(x.dtype)


def masked_row_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-row mean of `x` (B, T) over real steps -> (B,); 0 for a row with no real step."""
    mask = as_step_mask(mask, x.shape)
    total = torch.where(mask, x, torch.zeros((), dtype=x.dtype, device=x.device)).sum(dim=-1)
    return total / mask.sum(dim=-1).clamp(min=1).to(x.dtype)


def check_probability(name: str, value: float, *, allow_zero: bool = True) -> None:
    """Raise if `value` is not in [0, 1] (or (0, 1] when zero is not allowed)."""
    low_ok = value >= 0 if allow_zero else value > 0
    if not (low_ok and value <= 1):
        bound = "[0, 1]" if allow_zero else "(0, 1]"
        raise ValueError(f"{name}={value} is outside {bound}; pass a value in {bound}")


def check_non_negative(name: str, value: float) -> None:
    """Raise if `value` is negative (or NaN)."""
    if not value >= 0:
        raise ValueError(f"{name}={value} must be >= 0")


def check_bootstrap(bootstrap_value: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """Return the (B,) bootstrap values (zeros when unknown) in `like`'s dtype, checking the shape."""
    batch = like.shape[0]
    if bootstrap_value is None:
        return like.new_zeros(batch)
    if tuple(bootstrap_value.shape) != (batch,):
        raise ValueError(
            f"bootstrap_value has shape {tuple(bootstrap_value.shape)}; "
            f"pass one value per row, shape ({batch},)"
        )
    return bootstrap_value.detach().to(like.dtype)


def check_same_shape(**tensors: torch.Tensor) -> torch.Size:
    """Raise unless all tensors share one shape; return it."""
    shapes = {name: tuple(t.shape) for name, t in tensors.items()}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"these tensors must all have the same (B, T) shape: {shapes}")
    return next(iter(tensors.values())).shape


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """float32 at least: targets in bf16/fp16 lose the small differences the recursions add up."""
    return torch.promote_types(x.dtype, torch.float32)
