"""GiGPO-style critic-free group baseline (``algos.group``): advantages that compare the episodes of
one group with each other, computed once on the whole batch before it is split into micro-batches,
and PPO's clipped ratio against the behaviour policy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch

from distrl_core.algos.group import GroupAdvantages, clipped_policy_loss, gigpo_advantages
from distrl_core.algos.masking import masked_mean
from distrl_core.learner.batch import StepBatch
from distrl_core.learner.losses.base import (
    ActorTermsConfig,
    Loss,
    Objective,
    ProximalLogp,
    Traits,
    uniform_priorities,
)
from distrl_core.policy.types import EvalOutput

__all__ = ["GiGPOConfig", "GiGPOInputs", "GiGPOLoss", "GroupBatch", "group_ids"]


@dataclass(frozen=True)
class GiGPOConfig:
    """The `LearnerConfig` fields GiGPO reads (documented there)."""

    gamma: float
    group_use_std: bool
    group_step_weight: float
    clip_eps: float
    actor_terms: ActorTermsConfig


@dataclass(frozen=True)
class GiGPOInputs:
    """A micro-batch's rows of the whole batch's group advantages."""

    advantages: torch.Tensor  # (b, t) A^E + ω·A^S


@dataclass(frozen=True)
class GroupBatch:
    """The whole batch's group advantages (`BatchInputs` of `GiGPOLoss`)."""

    groups: GroupAdvantages

    def rows(self, rows: Sequence[int], sub: StepBatch) -> GiGPOInputs:
        return GiGPOInputs(self.groups.advantages[list(rows)][:, : sub.shape[1]])

    def metrics(self) -> dict[str, float]:
        return {
            "group_singleton_step_fraction": float(self.groups.singleton_step_fraction),
            "group_episode_advantage_abs_mean": float(self.groups.episode.abs().mean()),
        }


def group_ids(batch: StepBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """(B,) episode-group and (B, T) step-group ids of a batch of whole episodes.

    Episode group: the same task acted by the same policy version (of the episode's first step).
    The task fixes the start state: SimDroid loads the same screens for a task whatever the reset
    seed, which only drives distractor pop-ups and faults — and a pop-up changes the observation,
    so it splits the step groups, not the comparison of outcomes. The step schema stores no reset
    seed; the in-memory loop gives a group's episodes the same one anyway (LoopConfig.group_size).
    The policy version keeps episodes of an older policy out of a newer one's group. Step group:
    the episode group plus the exact instruction and observation text the policy saw ("anchor
    state"); ids are dense integers from dictionaries, so no hash collision can merge two states.
    """
    rows, cols = batch.shape
    first_versions = batch.policy_versions[:, 0].tolist()
    episode_keys: dict[tuple[str, int], int] = {}
    episode = [
        episode_keys.setdefault((batch.task_ids[b], int(first_versions[b])), len(episode_keys))
        for b in range(rows)
    ]
    state_keys: dict[tuple[int, str, str], int] = {}
    steps = torch.full((rows, cols), -1, dtype=torch.long)
    for step, flat in zip(batch.steps, batch.flat_index.tolist(), strict=True):
        b, t = divmod(flat, cols)
        key = (episode[b], step.instruction, step.observation_text)
        steps[b, t] = state_keys.setdefault(key, len(state_keys))
    return torch.tensor(episode, dtype=torch.long), steps


class GiGPOLoss(Loss[GiGPOInputs]):
    """−mean min(r·A, clip(r)·A) with r = π/μ on the group advantages, plus the actor terms. No
    critic: ``critic_warmup_updates`` does not apply, the value heads are not trained, and
    priorities are uniform, as for the other baselines."""

    traits: ClassVar[Traits] = Traits(uses_critic=False, needs_groups=True, needs_whole_episodes=True)
    slice_type = GiGPOConfig
    config: GiGPOConfig

    def batch_inputs(self, batch: StepBatch, mask: torch.Tensor, proximal: ProximalLogp) -> GroupBatch:
        """Group advantages on the whole batch; `mask` drops stale rows from their groups as well
        as from the loss."""
        cfg = self.config
        episode, steps = group_ids(batch)
        groups = gigpo_advantages(
            batch.rewards, batch.dones, mask, episode.to(mask.device), steps.to(mask.device),
            gamma=cfg.gamma, omega=cfg.group_step_weight, use_std=cfg.group_use_std,
        )  # fmt: skip
        return GroupBatch(groups)

    def __call__(
        self, out: EvalOutput, batch: StepBatch, mask: torch.Tensor, inputs: GiGPOInputs
    ) -> Objective:
        actor_mask = mask & out.known
        actor = clipped_policy_loss(
            out.logp, batch.logp_mu, inputs.advantages, actor_mask,
            clip_eps=self.config.clip_eps, terms=self.config.actor_terms.terms(out, batch),
        )  # fmt: skip
        stats = {
            "policy_gradient": actor.policy_gradient,
            "entropy": actor.entropy,
            "penalty": actor.penalty,
            "clip_fraction": actor.clip_fraction,
            "advantage_abs_mean": masked_mean(inputs.advantages.abs(), actor_mask),
        }
        # No critic: a zero critic loss leaves the value heads' gradients empty (AdamW skips them).
        no_critic = out.values.new_zeros(())
        return Objective(actor.loss, no_critic, uniform_priorities(mask), stats)
