"""Decoupled PPO's loss (AReaL, ``algos.decoupled``): the ratio clipped against a proximal policy
π_prox, the gap between it and the behaviour policy corrected by a truncated weight."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch

from distrl_core.algos.decoupled import decoupled_ppo_loss
from distrl_core.algos.masking import masked_mean
from distrl_core.learner.batch import StepBatch
from distrl_core.learner.config import ProximalPolicy
from distrl_core.learner.losses.base import (
    ActorTermsConfig,
    AdvantageConfig,
    CriticConfig,
    DPERConfig,
    Loss,
    Objective,
    ProximalLogp,
    RetraceConfig,
    Traits,
    critics,
    dper,
    retrace,
    returns_targets,
    shaped_advantages,
    uniform_priorities,
)
from distrl_core.policy.types import EvalOutput

__all__ = ["DecoupledPPOConfig", "DecoupledPPOInputs", "DecoupledPPOLoss", "ProximalBatch"]


@dataclass(frozen=True)
class DecoupledPPOConfig:
    """The `LearnerConfig` fields decoupled PPO reads (documented there); ``retrace`` and
    ``priorities`` beyond γ only with ``decoupled_retrace``."""

    clip_eps: float
    proximal_policy: ProximalPolicy
    proximal_weight_max: float
    decoupled_retrace: bool
    retrace: RetraceConfig
    priorities: DPERConfig
    advantages: AdvantageConfig
    actor_terms: ActorTermsConfig
    critic: CriticConfig


@dataclass(frozen=True)
class DecoupledPPOInputs:
    """A micro-batch's log π_prox of its actions; None: π_prox is the learner's weights at the start
    of the update, read off the micro-batch's own forward pass (detached)."""

    logp_prox: torch.Tensor | None  # (b, t)


@dataclass(frozen=True)
class ProximalBatch:
    """`BatchInputs` of `DecoupledPPOLoss`: where each micro-batch's π_prox comes from."""

    proximal: ProximalLogp | None  # None: the update's start

    def rows(self, rows: Sequence[int], sub: StepBatch) -> DecoupledPPOInputs:
        # Before the micro-batch's forward with gradient: swapping the averaged weights in
        # afterwards would change tensors that forward's graph saved.
        return DecoupledPPOInputs(None if self.proximal is None else self.proximal(sub))

    def metrics(self) -> dict[str, float]:
        return {}


class DecoupledPPOLoss(Loss[DecoupledPPOInputs]):
    """AReaL's decoupled PPO. With ``decoupled_retrace`` (the default) Retrace's advantages, critic
    targets and DPER priorities, as A-RIDE's: only the actor's weighting (clipped ratio, behaviour
    weight) is decoupled PPO's; without, G_t − V(s_t) from the behaviour data's discounted returns
    (AReaL's GAE from behaviour data), the critic regressing G_t, and uniform priorities."""

    traits: ClassVar[Traits] = Traits(needs_proximal=True)
    slice_type = DecoupledPPOConfig
    config: DecoupledPPOConfig

    def batch_inputs(self, batch: StepBatch, mask: torch.Tensor, proximal: ProximalLogp) -> ProximalBatch:
        return ProximalBatch(proximal if self.config.proximal_policy == "average" else None)

    def __call__(
        self, out: EvalOutput, batch: StepBatch, mask: torch.Tensor, inputs: DecoupledPPOInputs
    ) -> Objective:
        cfg = self.config
        logp_prox = out.logp.detach() if inputs.logp_prox is None else inputs.logp_prox
        actor_mask = mask & out.known
        if cfg.decoupled_retrace:
            _, targets = retrace(out, batch, mask, cfg.retrace)
            advantages, v_targets = targets.advantages, targets.v_targets
            priorities = dper(targets, out, mask, cfg.priorities)
        else:
            values = out.values.detach()
            v_targets = returns_targets(out, batch, mask, cfg.retrace.gamma)
            advantages = torch.where(mask, v_targets - values, torch.zeros_like(values))
            priorities = uniform_priorities(mask)
        # With π_prox = the update's start r = 1 at the one optimiser step and nothing is clipped,
        # so PPO's clip does not keep signed advantages from collapsing the policy (as A-RIDE's).
        advantages = shaped_advantages(advantages, actor_mask, cfg.advantages)
        actor = decoupled_ppo_loss(
            out.logp, logp_prox, batch.logp_mu, advantages, actor_mask,
            clip_eps=cfg.clip_eps, weight_max=cfg.proximal_weight_max,
            terms=cfg.actor_terms.terms(out, batch),
        )  # fmt: skip
        critic, critic_parts = critics(out, v_targets, batch, mask, cfg.critic)
        stats = {
            "policy_gradient": actor.policy_gradient,
            "entropy": actor.entropy,
            "penalty": actor.penalty,
            "clip_fraction": actor.clip_fraction,
            "behaviour_weight_mean": actor.behaviour_weight_mean,
            "behaviour_truncated_fraction": actor.truncated_fraction,
            "advantage_abs_mean": masked_mean(advantages.abs(), actor_mask),
            "advantage_mean": masked_mean(advantages, actor_mask),
            **critic_parts,
        }
        return Objective(actor.loss, critic, priorities, stats)
