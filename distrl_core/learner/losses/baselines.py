"""The baselines' losses: DigiRL (doubly-robust advantages, instruction curriculum, filtered AWR;
arXiv 2406.11896) and filtered behaviour cloning (successes only). Both return uniform priorities,
so a prioritized replay samples their data uniformly, as DigiRL does."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from distrl_core.algos.baselines import (
    curriculum_mask,
    digirl_step_advantages,
    filtered_awr_loss,
    filtered_bc_loss,
)
from distrl_core.algos.masking import masked_mean
from distrl_core.learner.batch import StepBatch
from distrl_core.learner.losses.base import (
    CriticConfig,
    Objective,
    RowLoss,
    bootstrap,
    critics,
    returns_targets,
    uniform_priorities,
)
from distrl_core.policy.types import EvalOutput

__all__ = ["DigiRLConfig", "DigiRLLoss", "FilteredBCConfig", "FilteredBCLoss"]


@dataclass(frozen=True)
class DigiRLConfig:
    """The `LearnerConfig` fields DigiRL reads (documented there)."""

    gamma: float
    digirl_lam: float
    curriculum_top_fraction: float
    awr_threshold: float
    critic: CriticConfig


class DigiRLLoss(RowLoss):
    """Filtered AWR on DigiRL's doubly-robust step advantages, over the trajectories the instruction
    curriculum keeps; the critics regress the discounted returns."""

    slice_type = DigiRLConfig
    config: DigiRLConfig

    def __call__(self, out: EvalOutput, batch: StepBatch, mask: torch.Tensor, inputs: None) -> Objective:
        cfg = self.config
        actor_mask = mask & out.known
        values = out.values.detach()
        advantages = digirl_step_advantages(
            batch.rewards, values, batch.dones, mask,
            lam=cfg.digirl_lam, bootstrap_value=bootstrap(values, batch, mask),
        )  # fmt: skip
        returns = (batch.rewards * mask).sum(dim=1)
        keep = curriculum_mask(returns, torch.sigmoid(out.traj_logits.detach()), cfg.curriculum_top_fraction)
        actor_loss = filtered_awr_loss(out.logp, advantages, actor_mask, keep, cfg.awr_threshold)
        critic, critic_parts = critics(
            out, returns_targets(out, batch, mask, cfg.gamma), batch, mask, cfg.critic
        )
        stats = {
            "entropy": masked_mean(out.entropy.detach(), mask),
            "advantage_mean": masked_mean(advantages, actor_mask),
            "kept_fraction": keep.float().mean(),
            **critic_parts,
        }
        return Objective(actor_loss, critic, uniform_priorities(mask), stats)


@dataclass(frozen=True)
class FilteredBCConfig:
    """The `LearnerConfig` fields filtered BC reads (documented there): its critics' only."""

    gamma: float
    critic: CriticConfig


class FilteredBCLoss(RowLoss):
    """−mean log π over the successful episodes' steps; the critics regress the discounted returns."""

    slice_type = FilteredBCConfig
    config: FilteredBCConfig

    def __call__(self, out: EvalOutput, batch: StepBatch, mask: torch.Tensor, inputs: None) -> Objective:
        actor_loss = filtered_bc_loss(out.logp, mask & out.known, batch.success)
        targets = returns_targets(out, batch, mask, self.config.gamma)
        critic, critic_parts = critics(out, targets, batch, mask, self.config.critic)
        stats = {
            "entropy": masked_mean(out.entropy.detach(), mask),
            "kept_fraction": batch.success.float().mean(),
            **critic_parts,
        }
        return Objective(actor_loss, critic, uniform_priorities(mask), stats)
