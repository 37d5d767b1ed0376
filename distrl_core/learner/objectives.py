"""The training objectives on one evaluated batch, built from distrl_core.algos' functions.

Each returns the actor loss, the critic loss (step critic plus trajectory critic; none for gigpo),
tensors for the metrics, and the trajectories' new priorities. A-RIDE (and decoupled PPO on
Retrace's advantages) prioritize with DPER: the baselines return uniform priorities, so a
prioritized replay samples their data uniformly, as DigiRL does. gigpo's advantages compare the
episodes of a group with each other, so they are computed once on the whole batch
(`group_advantages`) before it is split into micro-batches.

`ALGORITHM_SPECS` holds one `AlgorithmSpec` per `Algorithm`: its objective and the traits the
learner, the local loop and the learner task read (a critic, groups, whole episodes), so that no
code outside this table tests an algorithm's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from distrl_core.algos.baselines import (
    curriculum_mask,
    digirl_step_advantages,
    filtered_awr_loss,
    filtered_bc_loss,
)
from distrl_core.algos.decoupled import decoupled_ppo_loss
from distrl_core.algos.group import GroupAdvantages, clipped_policy_loss, gigpo_advantages
from distrl_core.algos.losses import critic_loss, policy_loss, trajectory_critic_loss
from distrl_core.algos.masking import masked_mean
from distrl_core.algos.priorities import dper_priority
from distrl_core.algos.ratios import importance_ratios
from distrl_core.algos.retrace import RetraceTargets, discounted_returns, retrace_targets
from distrl_core.learner.batch import StepBatch
from distrl_core.learner.config import Algorithm, LearnerConfig
from distrl_core.policy.types import EvalOutput

__all__ = [
    "ALGORITHM_SPECS",
    "AlgorithmSpec",
    "Objective",
    "algorithm_spec",
    "compute_objective",
    "group_advantages",
    "group_ids",
]


@dataclass
class Objective:
    actor_loss: torch.Tensor  # ()
    critic_loss: torch.Tensor  # ()
    priorities: torch.Tensor  # (B,) detached
    stats: dict[str, torch.Tensor]  # detached scalars for the metrics


def _bootstrap(values: torch.Tensor, batch: StepBatch, mask: torch.Tensor) -> torch.Tensor:
    """(B,) value after each row: 0 after a done step; for a window cut before the episode's end,
    the critic's value of the window's last state (the next state is not in the batch)."""
    last = mask.sum(dim=1).clamp(min=1) - 1
    rows = torch.arange(values.shape[0], device=values.device)
    ended = batch.dones[rows, last] > 0
    return torch.where(ended, torch.zeros_like(last, dtype=values.dtype), values.detach()[rows, last])


def _critics(out: EvalOutput, targets: torch.Tensor, batch: StepBatch, mask, cfg: LearnerConfig):
    step = critic_loss(out.values, targets, mask, batch.is_weights)
    trajectory = trajectory_critic_loss(out.traj_logits, batch.success)
    return step + cfg.trajectory_critic_coef * trajectory, step.detach(), trajectory.detach()


def _normalized(advantages: torch.Tensor, actor_mask: torch.Tensor) -> torch.Tensor:
    """Advantages centred and scaled over the batch's real steps (as A-RIDE's normalize_advantages)."""
    mean = masked_mean(advantages, actor_mask)
    std = torch.sqrt(masked_mean((advantages - mean).square(), actor_mask))
    return torch.where(actor_mask, (advantages - mean) / std.clamp(min=1e-6), advantages)


def _retrace(
    out: EvalOutput, batch: StepBatch, mask: torch.Tensor, cfg: LearnerConfig
) -> tuple[torch.Tensor, RetraceTargets]:
    """ρ = π/μ (B, T) and Retrace's targets, advantages and TD errors on these rows."""
    rho = importance_ratios(out.logp, batch.logp_mu, mask)
    values = out.values.detach()
    retrace = retrace_targets(
        values,
        batch.rewards,
        batch.dones,
        rho,
        mask,
        _bootstrap(values, batch, mask),
        gamma=cfg.gamma,
        lam=cfg.lam,
        rho_max=cfg.rho_max,
        c_max=cfg.c_max,
    )
    return rho, retrace


def _dper(retrace: RetraceTargets, out: EvalOutput, mask: torch.Tensor, cfg: LearnerConfig) -> torch.Tensor:
    """(B,) DPER priorities from Retrace's TD errors, truncated ratios and the policy's entropy."""
    return dper_priority(
        retrace.td_errors, retrace.rho_bar, out.entropy.detach(), mask,
        w1=cfg.w1, w2=cfg.w2, w3=cfg.w3, eps=cfg.priority_eps,
    )  # fmt: skip


def _aride(
    out: EvalOutput, batch: StepBatch, mask: torch.Tensor, cfg: LearnerConfig, _group=None
) -> Objective:
    actor_mask = mask & out.known
    rho, retrace = _retrace(out, batch, mask, cfg)
    advantages = retrace.advantages
    if cfg.normalize_advantages:
        # Centre and scale over the batch's steps: a critic that lags the policy biases every
        # advantage one way, which would push all sampled actions up (or down) together.
        advantages = _normalized(advantages, actor_mask)
    if cfg.positive_advantages_only:
        advantages = advantages.clamp(min=0.0)
    actor = policy_loss(
        out.logp,
        advantages,
        batch.is_weights,
        out.entropy,
        actor_mask,
        entropy_coef=cfg.entropy_coef,
        invalid=batch.invalid,
        invalid_penalty=cfg.invalid_penalty,
        repeat=batch.repeat,
        repeat_penalty=cfg.repeat_penalty,
    )
    critic, step_loss, traj_loss = _critics(out, retrace.v_targets, batch, mask, cfg)
    priorities = _dper(retrace, out, mask, cfg)
    stats = {
        "policy_gradient": actor.policy_gradient,
        "entropy": actor.entropy,
        "penalty": actor.penalty,
        "rho_mean": masked_mean(rho, mask),
        "rho_clipped_fraction": masked_mean((rho > cfg.rho_max).float(), mask),
        "advantage_mean": masked_mean(advantages, actor_mask),
        "td_abs_mean": masked_mean(retrace.td_errors.abs(), mask),
        "v_target_mean": masked_mean(retrace.v_targets, mask),
    }
    return Objective(
        actor.loss, critic, priorities, {**stats, "critic_step": step_loss, "critic_traj": traj_loss}
    )


def _digirl(
    out: EvalOutput, batch: StepBatch, mask: torch.Tensor, cfg: LearnerConfig, _group=None
) -> Objective:
    actor_mask = mask & out.known
    values = out.values.detach()
    advantages = digirl_step_advantages(
        batch.rewards,
        values,
        batch.dones,
        mask,
        lam=cfg.digirl_lam,
        bootstrap_value=_bootstrap(values, batch, mask),
    )
    returns = (batch.rewards * mask).sum(dim=1)
    keep = curriculum_mask(returns, torch.sigmoid(out.traj_logits.detach()), cfg.curriculum_top_fraction)
    actor_loss = filtered_awr_loss(out.logp, advantages, actor_mask, keep, cfg.awr_threshold)
    targets = discounted_returns(batch.rewards, batch.dones, mask, cfg.gamma, _bootstrap(values, batch, mask))
    critic, step_loss, traj_loss = _critics(out, targets, batch, mask, cfg)
    stats = {
        "entropy": masked_mean(out.entropy.detach(), mask),
        "advantage_mean": masked_mean(advantages, actor_mask),
        "kept_fraction": keep.float().mean(),
        "critic_step": step_loss,
        "critic_traj": traj_loss,
    }
    return Objective(actor_loss, critic, torch.ones(mask.shape[0], device=mask.device), stats)


def _filtered_bc(
    out: EvalOutput, batch: StepBatch, mask: torch.Tensor, cfg: LearnerConfig, _group=None
) -> Objective:
    actor_mask = mask & out.known
    actor_loss = filtered_bc_loss(out.logp, actor_mask, batch.success)
    values = out.values.detach()
    targets = discounted_returns(batch.rewards, batch.dones, mask, cfg.gamma, _bootstrap(values, batch, mask))
    critic, step_loss, traj_loss = _critics(out, targets, batch, mask, cfg)
    stats = {
        "entropy": masked_mean(out.entropy.detach(), mask),
        "kept_fraction": batch.success.float().mean(),
        "critic_step": step_loss,
        "critic_traj": traj_loss,
    }
    return Objective(actor_loss, critic, torch.ones(mask.shape[0], device=mask.device), stats)


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


def group_advantages(batch: StepBatch, mask: torch.Tensor, cfg: LearnerConfig) -> GroupAdvantages | None:
    """Group advantages on the whole batch for an algorithm that needs groups (gigpo; None for the
    others); `mask` drops stale rows from their groups as well as from the loss."""
    if not algorithm_spec(cfg.algorithm).needs_groups:
        return None
    episode, steps = group_ids(batch)
    return gigpo_advantages(
        batch.rewards, batch.dones, mask, episode.to(mask.device), steps.to(mask.device),
        gamma=cfg.gamma, omega=cfg.group_step_weight, use_std=cfg.group_use_std,
    )  # fmt: skip


def _gigpo(
    out: EvalOutput, batch: StepBatch, mask: torch.Tensor, cfg: LearnerConfig, group: torch.Tensor | None
) -> Objective:
    if group is None:
        raise ValueError(
            "gigpo's advantages compare episodes across the whole batch; pass "
            "group_advantages(batch, mask, cfg).advantages (Learner.update does)"
        )
    actor_mask = mask & out.known
    actor = clipped_policy_loss(
        out.logp, batch.logp_mu, group, actor_mask, clip_eps=cfg.clip_eps,
        entropy=out.entropy, entropy_coef=cfg.entropy_coef,
        invalid=batch.invalid, invalid_penalty=cfg.invalid_penalty,
        repeat=batch.repeat, repeat_penalty=cfg.repeat_penalty,
    )  # fmt: skip
    stats = {
        "policy_gradient": actor.policy_gradient,
        "entropy": actor.entropy,
        "penalty": actor.penalty,
        "clip_fraction": actor.clip_fraction,
        "advantage_abs_mean": masked_mean(group.abs(), actor_mask),
    }
    # No critic: a zero critic loss leaves the value heads' gradients empty (AdamW skips them).
    no_critic = out.values.new_zeros(())
    return Objective(actor.loss, no_critic, torch.ones(mask.shape[0], device=mask.device), stats)


def _decoupled_ppo(
    out: EvalOutput, batch: StepBatch, mask: torch.Tensor, cfg: LearnerConfig, logp_prox: torch.Tensor | None
) -> Objective:
    """AReaL's decoupled PPO; `logp_prox` (B, T) is log π_prox of these rows (Learner.update computes
    it, per ``proximal_policy``). With ``decoupled_retrace`` (the default) Retrace's advantages,
    critic targets and DPER priorities, as A-RIDE's; without, G_t − V(s_t) from the behaviour
    data's discounted returns (AReaL's GAE from behaviour data), the critic regressing G_t."""
    if logp_prox is None:
        raise ValueError("decoupled_ppo needs log π_prox of the batch's actions; Learner.update passes it")
    actor_mask = mask & out.known
    if cfg.decoupled_retrace:
        # Retrace's off-policy-corrected advantages, targets and DPER priorities, as A-RIDE: only
        # the actor's weighting (clipped ratio, behaviour weight) is decoupled PPO's.
        _, retrace = _retrace(out, batch, mask, cfg)
        advantages, targets = retrace.advantages, retrace.v_targets
        priorities = _dper(retrace, out, mask, cfg)
    else:
        values = out.values.detach()
        targets = discounted_returns(
            batch.rewards, batch.dones, mask, cfg.gamma, _bootstrap(values, batch, mask)
        )
        advantages = torch.where(mask, targets - values, torch.zeros_like(values))
        priorities = torch.ones(mask.shape[0], device=mask.device)
    if cfg.normalize_advantages:
        advantages = _normalized(advantages, actor_mask)
    if cfg.positive_advantages_only:
        # As for A-RIDE: the signed steps of failed episodes push this policy's mass off correct
        # candidates until it solves nothing; PPO's clip does not stop that, since with
        # π_prox = the update's start r = 1 at the one optimiser step and nothing is clipped.
        advantages = advantages.clamp(min=0.0)
    actor = decoupled_ppo_loss(
        out.logp, logp_prox, batch.logp_mu, advantages, actor_mask,
        clip_eps=cfg.clip_eps, weight_max=cfg.proximal_weight_max,
        entropy=out.entropy, entropy_coef=cfg.entropy_coef,
        invalid=batch.invalid, invalid_penalty=cfg.invalid_penalty,
        repeat=batch.repeat, repeat_penalty=cfg.repeat_penalty,
    )  # fmt: skip
    critic, step_loss, traj_loss = _critics(out, targets, batch, mask, cfg)
    stats = {
        "policy_gradient": actor.policy_gradient,
        "entropy": actor.entropy,
        "penalty": actor.penalty,
        "clip_fraction": actor.clip_fraction,
        "behaviour_weight_mean": actor.behaviour_weight_mean,
        "behaviour_truncated_fraction": actor.truncated_fraction,
        "advantage_abs_mean": masked_mean(advantages.abs(), actor_mask),
        "advantage_mean": masked_mean(advantages, actor_mask),
        "critic_step": step_loss,
        "critic_traj": traj_loss,
    }
    return Objective(actor.loss, critic, priorities, stats)


ObjectiveFn = Callable[[EvalOutput, StepBatch, torch.Tensor, LearnerConfig, torch.Tensor | None], Objective]


@dataclass(frozen=True)
class AlgorithmSpec:
    """One algorithm: its objective on an evaluated batch, and what the rest of the learner must do
    for it.

    - ``objective``: ``(out, batch, mask, cfg, group) -> Objective``.
    - ``uses_critic``: it trains the value heads, so the actor waits ``critic_warmup_updates``
      updates for them; without a critic the actor trains from the first update.
    - ``needs_groups``: its advantages compare the episodes of one task within a batch: they are
      computed on the whole batch before the micro-batches (``group_advantages``), and the local
      loop collects and samples groups of one task (``group_size``).
    - ``needs_whole_episodes``: it reads whole episodes' returns, so the learner task refuses a
      ``window`` that samples pieces of episodes.
    - ``needs_proximal``: its fifth argument is log π_prox of the rows' actions (decoupled PPO's
      proximal policy, ``LearnerConfig.proximal_policy``) instead of group advantages.
    """

    objective: ObjectiveFn
    uses_critic: bool = True
    needs_groups: bool = False
    needs_whole_episodes: bool = False
    needs_proximal: bool = False


ALGORITHM_SPECS: dict[Algorithm, AlgorithmSpec] = {
    "aride": AlgorithmSpec(_aride),
    "digirl": AlgorithmSpec(_digirl),
    "filtered_bc": AlgorithmSpec(_filtered_bc),
    "gigpo": AlgorithmSpec(_gigpo, uses_critic=False, needs_groups=True, needs_whole_episodes=True),
    "decoupled_ppo": AlgorithmSpec(_decoupled_ppo, needs_proximal=True),
}


def algorithm_spec(algorithm: Algorithm) -> AlgorithmSpec:
    """``algorithm``'s spec; an algorithm without one names where it goes."""
    try:
        return ALGORITHM_SPECS[algorithm]
    except KeyError:
        raise ValueError(
            f"algorithm {algorithm!r} has no AlgorithmSpec: add it to ALGORITHM_SPECS in "
            "distrl_core/learner/objectives.py"
        ) from None


def compute_objective(
    out: EvalOutput,
    batch: StepBatch,
    mask: torch.Tensor,
    cfg: LearnerConfig,
    group: torch.Tensor | None = None,  # (B, T) gigpo's advantages for these rows (group_advantages),
    # or decoupled_ppo's log π_prox (needs_proximal)
) -> Objective:
    return algorithm_spec(cfg.algorithm).objective(out, batch, mask, cfg, group)
