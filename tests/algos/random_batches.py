"""Seeded random padded batches for the algos tests: ragged rows, dones mid-window, NaN in the padding."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class StepBatch:
    values: torch.Tensor  # (B, T)
    rewards: torch.Tensor  # (B, T)
    dones: torch.Tensor  # (B, T) 0/1
    rho: torch.Tensor  # (B, T) > 0
    mask: torch.Tensor  # (B, T) 0/1 float, real steps first
    bootstrap: torch.Tensor  # (B,)
    lengths: list[int]


def random_step_batch(
    seed: int, batch: int, horizon: int, *, done_prob: float = 0.25, pad_value: float = float("nan")
) -> StepBatch:
    """Rows of random length 0..horizon (at least one full row), padded with `pad_value`."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, horizon + 1, (batch,), generator=gen).tolist()
    lengths[int(torch.randint(0, batch, (1,), generator=gen))] = horizon
    mask = torch.zeros(batch, horizon, dtype=torch.float64)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1.0
    real = mask > 0
    values = torch.randn(batch, horizon, generator=gen, dtype=torch.float64)
    rewards = torch.randn(batch, horizon, generator=gen, dtype=torch.float64)
    dones = (torch.rand(batch, horizon, generator=gen, dtype=torch.float64) < done_prob).to(torch.float64)
    # Log-normal ratios spread well above and below 1, so the ρ_max / c_max caps bite.
    rho = torch.exp(1.2 * torch.randn(batch, horizon, generator=gen, dtype=torch.float64))
    bootstrap = torch.randn(batch, generator=gen, dtype=torch.float64)
    pad = torch.tensor(pad_value, dtype=torch.float64)
    return StepBatch(
        values=torch.where(real, values, pad),
        rewards=torch.where(real, rewards, pad),
        dones=torch.where(real, dones, pad),
        rho=torch.where(real, rho, pad),
        mask=mask,
        bootstrap=bootstrap,
        lengths=lengths,
    )


def rows(x: torch.Tensor) -> list[list[float]]:
    return x.tolist()
