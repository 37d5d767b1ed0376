"""The learner: ``update(batch) -> (metrics, new priorities)`` for A-RIDE and the baselines."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from distrl_core.algos.priorities import linear_schedule
from distrl_core.learner.averaging import WeightAverage
from distrl_core.learner.batch import StepBatch
from distrl_core.learner.config import LearnerConfig
from distrl_core.learner.micro_batch import MicroBatchLoss, MicroBatchPart
from distrl_core.learner.objectives import algorithm_spec, group_advantages
from distrl_core.learner.task_stats import TaskStats, options_active
from distrl_core.policy.defaults import training_defaults
from distrl_core.policy.model import Policy

if TYPE_CHECKING:
    from distrl_core.learner.distributed import DataParallel

__all__ = ["Learner"]


def _grad_norm(parameters: Sequence[nn.Parameter], clip: float) -> float:
    params = [p for p in parameters if p.grad is not None]
    if not params:
        return 0.0
    if clip > 0:
        return float(torch.nn.utils.clip_grad_norm_(params, clip))
    return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in params])))


class Learner:
    """Trains a :class:`Policy` from stored step rows.

    ``policy_version`` is the version the learner's weights correspond to (the caller bumps it when
    it publishes); the batch's policy lag is measured against it. Separate AdamW optimisers (and
    learning rates) for the actor and the critics. On a pretrained base (``policy.config.base``)
    the actor's optimiser has two groups, the adapter at ``backbone_lr`` (default from
    policy.defaults: 1e-4) and the heads at ``actor_lr``, and a micro-batch holds at most
    ``PRETRAINED.micro_batch_size`` trajectories unless ``micro_batch_size`` was set explicitly;
    the tiny default keeps one group and ``config.micro_batch_size``.
    """

    def __init__(
        self,
        policy: Policy,
        config: LearnerConfig | None = None,
        *,
        policy_version: int = 0,
        backbone_lr: float | None = None,
    ) -> None:
        self.policy = policy
        self.config = config or LearnerConfig()
        self.policy_version = policy_version
        self.updates = 0
        self.task_stats = TaskStats()  # the MobileRL-style options' per-task counts
        torch.manual_seed(self.config.seed)
        cfg = self.config
        self.actor_optimizer = torch.optim.AdamW(
            self._actor_groups(backbone_lr), lr=cfg.actor_lr, weight_decay=cfg.weight_decay
        )
        self.micro_batch_size = self._micro_batch_size()
        self.critic_optimizer = torch.optim.AdamW(
            policy.critic_parameters(), lr=cfg.critic_lr, weight_decay=cfg.weight_decay
        )
        self.loss = MicroBatchLoss(policy)
        self.parallel: DataParallel | None = None  # set to train on several processes
        self.average = (
            WeightAverage(policy.actor_parameters() + policy.critic_parameters(), cfg.weight_average_decay)
            if cfg.weight_average_decay > 0
            else None
        )

    @contextmanager
    def averaged(self) -> Iterator[Policy]:
        """The policy with the averaged weights swapped in (the raw weights when averaging is off):
        what to publish, act with and evaluate. The block must not train."""
        with self.average.swapped_in() if self.average is not None else nullcontext():
            yield self.policy

    def _actor_groups(self, backbone_lr: float | None) -> list[dict[str, Any]]:
        backbone_lr = backbone_lr or training_defaults(self.policy.config).learner_backbone_lr
        return self.policy.actor_parameter_groups(self.config.actor_lr, backbone_lr)

    def _micro_batch_size(self) -> int:
        """The configured micro-batch, capped for a pretrained base when left at its default
        (LearnerConfig's 16 trajectories in one graph do not fit in memory with a real LM)."""
        cap = training_defaults(self.policy.config).micro_batch_size
        if cap is None or self.config.micro_batch_size != LearnerConfig.micro_batch_size:
            return self.config.micro_batch_size
        return min(cap, self.config.micro_batch_size)

    @property
    def device(self) -> torch.device:
        return self.policy.device

    def beta_at(self, updates: int | None = None) -> float:
        """The IS-weight exponent β for sampling the next batch (annealed linearly to beta_end)."""
        cfg = self.config
        return linear_schedule(
            cfg.beta_start,
            cfg.beta_end,
            cfg.beta_anneal_updates,
            self.updates if updates is None else updates,
        )

    def _fresh_rows(self, batch: StepBatch) -> torch.Tensor:
        """(B, T) mask of steps the losses use: real, and (by whole row) not too stale."""
        mask = batch.mask.clone()
        if self.config.max_policy_lag is not None:
            lag = torch.where(
                batch.mask,
                self.policy_version - batch.policy_versions,
                torch.zeros_like(batch.policy_versions),
            )
            stale_rows = (lag > self.config.max_policy_lag).any(dim=1)
            mask &= ~stale_rows[:, None]
        return mask

    def _proximal_logp(self, batch: StepBatch, autocast) -> torch.Tensor | None:
        """(B, T) log π_prox of the batch's actions for decoupled PPO: None for "update_start" (the
        objective reads it off this update's own forward pass), the published average's otherwise.
        Evaluated without word dropout: π_prox is the policy as collectors and evaluations run it."""
        if self.config.proximal_policy == "update_start" or self.average is None:
            return None
        with torch.no_grad(), autocast, self.averaged() as policy:
            return policy.evaluate(batch).logp.detach()

    def _reweigh(self, batch: StepBatch, priorities: torch.Tensor, sums: dict[str, float]) -> torch.Tensor:
        """The priorities times the MobileRL-style multipliers; the failure curriculum's periodic
        reset of never-solved tasks (after ``self.updates`` was counted)."""
        cfg = self.config
        multipliers = self.task_stats.priority_multipliers(batch, cfg)
        sums["priority_multiplier_mean"] = float(multipliers.mean())
        reset = cfg.failure_curriculum_reset_updates
        if cfg.failure_curriculum_attempts > 0 and reset > 0 and self.updates % reset == 0:
            sums["curriculum_tasks_reset"] = float(self.task_stats.reset_unsolved())
        return priorities * multipliers.to(priorities.dtype)

    def update(self, batch: StepBatch) -> tuple[dict[str, float], np.ndarray]:
        """One optimisation step on a batch of trajectories (its IS weights, if any, weigh them).

        Returns the metrics and one new priority per trajectory, in the batch's row order (by
        ``sample_idx``: the draw order). From stored rows::

            metrics, priorities = learner.update(StepBatch.from_rows(rows, is_weights))
        """
        started = time.perf_counter()
        cfg, policy = self.config, self.policy
        if policy.config.history > 0 and not batch.history_complete:
            raise ValueError(
                f"the policy shows {policy.config.history} previous actions, but the batch holds windows that "
                "start mid-episode, so those actions are unknown; sample whole episodes (window=None)"
            )
        batch = batch.to(self.device)
        shaping = options_active(cfg)
        if shaping:  # count the batch's new episodes before their lengths set L_min
            self.task_stats.observe_batch(batch)
            batch = self.task_stats.shaped_rewards(batch, cfg)
        full_mask = self._fresh_rows(batch)
        total_steps = max(int(full_mask.sum()), 1)
        total_rows = batch.size
        policy.train()
        self.actor_optimizer.zero_grad(set_to_none=True)
        self.critic_optimizer.zero_grad(set_to_none=True)
        sums: dict[str, float] = {}
        priorities = torch.zeros(batch.size)
        # Without a critic there is nothing to warm up.
        train_actor = (
            self.updates >= cfg.critic_warmup_updates or not algorithm_spec(cfg.algorithm).uses_critic
        )
        groups = group_advantages(batch, full_mask, cfg)  # before the split: groups span micro-batches
        spec = algorithm_spec(cfg.algorithm)
        autocast = torch.autocast(
            "cuda", dtype=torch.bfloat16, enabled=self.device.type == "cuda" and cfg.mixed_precision
        )
        # On several processes (learner/distributed.py) this rank's rows only; the totals above
        # and the groups stay those of the whole batch.
        parallel = self.parallel
        shard = range(batch.size) if parallel is None else parallel.rows(batch.size)
        forward = self.loss if parallel is None else parallel.loss
        for start in range(shard.start, shard.stop, self.micro_batch_size):
            rows = list(range(start, min(start + self.micro_batch_size, shard.stop)))
            sub = batch if len(rows) == batch.size else batch.select_rows(rows)
            mask = full_mask if sub is batch else full_mask[rows][:, : sub.shape[1]]
            group = None if groups is None else groups.advantages[rows][:, : sub.shape[1]]
            if spec.needs_proximal:
                # Before the forward with gradient: swapping the averaged weights in afterwards
                # would change tensors that forward's graph saved. None: the forward's own
                # log-probs, detached (π_prox = the weights at the start of the update).
                group = self._proximal_logp(sub, autocast)
            step_share = float(mask.sum()) / total_steps
            row_share = len(rows) / total_rows
            with nullcontext() if parallel is None else parallel.sync(last=rows[-1] == shard.stop - 1):
                loss, part = forward(sub, mask, group, cfg, step_share, row_share, train_actor)
                # DDP averages the ranks' gradients; each rank's loss is its share times W, so
                # the average is the sum of the shares: the whole batch's gradient.
                (loss if parallel is None else loss * parallel.world).backward()
            priorities[rows] = part.objective.priorities.float().cpu()
            _add_micro_batch(
                sums, part, float((mask & ~part.known).sum()) / total_steps, step_share, row_share
            )
        if parallel is not None:  # each rank filled its own rows of the priorities
            sums, priorities = parallel.sum_over_ranks(sums, priorities)
        grad_actor = _grad_norm(policy.actor_parameters(), cfg.actor_grad_clip)
        grad_critic = _grad_norm(policy.critic_parameters(), cfg.critic_grad_clip)
        if train_actor:
            self.actor_optimizer.step()
        self.critic_optimizer.step()
        if self.average is not None:
            self.average.update()
        self.updates += 1
        if shaping:
            priorities = self._reweigh(batch, priorities, sums)
        # The lag of the steps trained on; rows past max_policy_lag were sampled but masked out
        # (used_step_fraction says how many), and their lag would hide what the losses saw.
        lags = (self.policy_version - batch.policy_versions).float()
        lag = lags[full_mask] if bool(full_mask.any()) else lags.new_zeros(1)
        metrics = {
            **sums,
            "grad_norm_actor": grad_actor,
            "grad_norm_critic": grad_critic,
            "policy_lag_mean": float(lag.mean()),
            "policy_lag_max": float(lag.max()),
            "sampled_policy_lag_mean": float(lags[batch.mask].mean()),
            "used_step_fraction": float(full_mask.sum()) / max(int(batch.mask.sum()), 1),
            "trajectories": float(batch.size),
            "steps": float(batch.mask.sum()),
            "success_rate": float(batch.success.mean()),
            "beta": self.beta_at(),
            "actor_trained": float(train_actor),
            "update_s": time.perf_counter() - started,
        }
        if groups is not None:
            metrics["group_singleton_step_fraction"] = float(groups.singleton_step_fraction)
            metrics["group_episode_advantage_abs_mean"] = float(groups.episode.abs().mean())
        return metrics, priorities.numpy().astype(np.float64)


def _add_micro_batch(
    sums: dict[str, float], part: MicroBatchPart, unknown_share: float, step_share: float, row_share: float
) -> None:
    """Adds a micro-batch's losses and stats to the batch's, each weighted by its share."""
    objective = part.objective
    sums["actor_loss"] = sums.get("actor_loss", 0.0) + float(objective.actor_loss) * step_share
    sums["critic_loss"] = sums.get("critic_loss", 0.0) + float(objective.critic_loss) * row_share
    sums["unknown_action_fraction"] = sums.get("unknown_action_fraction", 0.0) + unknown_share
    for name, value in objective.stats.items():
        sums[name] = sums.get(name, 0.0) + float(value) * step_share
