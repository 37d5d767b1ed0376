"""A-RIDE's loss: Retrace actor-critic with DPER priorities (docs/architecture.md, "The learner's loss")."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from distrl_core.algos.losses import policy_loss
from distrl_core.algos.masking import masked_mean
from distrl_core.learner.batch import StepBatch
from distrl_core.learner.losses.base import (
    ActorTermsConfig,
    AdvantageConfig,
    CriticConfig,
    DPERConfig,
    Objective,
    RetraceConfig,
    RowLoss,
    critics,
    dper,
    retrace,
    shaped_advantages,
)
from distrl_core.policy.types import EvalOutput

__all__ = ["ARideConfig", "ARideLoss"]


@dataclass(frozen=True)
class ARideConfig:
    """The `LearnerConfig` fields A-RIDE reads (documented there): Retrace's γ, λ, ρ̄, c̄; DPER's
    weights; the advantages' shaping; the actor's entropy bonus and penalties; the critics' mix."""

    retrace: RetraceConfig
    priorities: DPERConfig
    advantages: AdvantageConfig
    actor_terms: ActorTermsConfig
    critic: CriticConfig


class ARideLoss(RowLoss):
    """−mean(w·A·log π) on Retrace's advantages (shaped by ``advantages``) plus the actor terms;
    the critics regress Retrace's targets; priorities from DPER."""

    slice_type = ARideConfig
    config: ARideConfig

    def __call__(self, out: EvalOutput, batch: StepBatch, mask: torch.Tensor, inputs: None) -> Objective:
        cfg = self.config
        actor_mask = mask & out.known
        rho, targets = retrace(out, batch, mask, cfg.retrace)
        advantages = shaped_advantages(targets.advantages, actor_mask, cfg.advantages)
        actor = policy_loss(
            out.logp, advantages, batch.is_weights, actor_mask, cfg.actor_terms.terms(out, batch)
        )
        critic, critic_parts = critics(out, targets.v_targets, batch, mask, cfg.critic)
        stats = {
            "policy_gradient": actor.policy_gradient,
            "entropy": actor.entropy,
            "penalty": actor.penalty,
            "rho_mean": masked_mean(rho, mask),
            "rho_clipped_fraction": masked_mean((rho > cfg.retrace.rho_max).float(), mask),
            "advantage_mean": masked_mean(advantages, actor_mask),
            "td_abs_mean": masked_mean(targets.td_errors.abs(), mask),
            "v_target_mean": masked_mean(targets.v_targets, mask),
            **critic_parts,
        }
        return Objective(actor.loss, critic, dper(targets, out, mask, cfg.priorities), stats)
