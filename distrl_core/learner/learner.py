"""One learner update, top to bottom, for every algorithm.

In reading order: ``train_step`` turns a draw's rows into a ``StepBatch`` and calls
``Learner.update``: ``_prepared`` (checks, device, MobileRL-style rewards), ``_fresh_rows`` (the
steps the losses use), the loss's whole-batch inputs, ``_accumulate_gradients`` over
``_micro_batches`` (each through ``MicroBatchLoss``: the policy's forward and the algorithm's loss,
an ``nn.Module`` so that DDP can wrap it), ``_optimiser_step`` and the metrics; ``train_step`` then
writes the priorities back. What an algorithm computes is its loss's
(``distrl_core/learner/losses/``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np
import torch
from torch import nn

from distrl_core.algos.priorities import linear_schedule
from distrl_core.learner.averaging import WeightAverage
from distrl_core.learner.batch import StepBatch
from distrl_core.learner.config import DEFAULT_MICRO_BATCH_SIZE, LearnerConfig
from distrl_core.learner.losses import Loss, Objective, make_loss
from distrl_core.learner.losses.base import BatchInputs
from distrl_core.learner.precision import autocast, refuse_outer_autocast
from distrl_core.learner.task_stats import TaskStats, options_active
from distrl_core.policy.defaults import training_defaults
from distrl_core.policy.model import Policy

if TYPE_CHECKING:
    from distrl_core.learner.distributed import DataParallel

__all__ = [
    "Draw",
    "Learner",
    "MicroBatch",
    "MicroBatchLoss",
    "MicroBatchPart",
    "Sampled",
    "StepResult",
    "train_step",
]


def _grad_norm(parameters: Sequence[nn.Parameter], clip: float) -> float:
    params = [p for p in parameters if p.grad is not None]
    if not params:
        return 0.0
    if clip > 0:
        return float(torch.nn.utils.clip_grad_norm_(params, clip))
    return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in params])))


@dataclass(frozen=True)
class MicroBatch:
    """Rows of the update's batch, with the shares that weigh their losses."""

    rows: list[int]  # the rows' indices in the batch
    batch: StepBatch  # those rows (padding trimmed)
    mask: torch.Tensor  # (b, t) steps the losses use
    inputs: Any  # the loss's extra inputs of these rows (Loss.batch_inputs(...).rows)
    step_share: float  # this micro-batch's steps / the batch's
    row_share: float  # this micro-batch's rows / the batch's


@dataclass
class MicroBatchPart:
    """What the metrics and priorities need from a micro-batch, without a graph: DDP finds the
    parameters a backward will reach by walking the tensors a forward returns, so the only tensor
    with a graph among them is the loss (an actor head kept out of the loss during the critic
    warm-up then counts as unused, instead of a gradient DDP waits for in vain)."""

    objective: Objective  # losses detached
    known: torch.Tensor  # (b, t) steps whose stored action the policy can produce


class MicroBatchLoss(nn.Module):
    """``forward(...) -> (loss, part)``: the actor loss weighted by the micro-batch's share of the
    batch's steps plus the critic loss by its share of the rows, so that the micro-batches' losses
    add up to the batch's."""

    def __init__(self, policy: Policy) -> None:
        super().__init__()
        # Registered as submodules so that DDP reduces (and at construction broadcasts) their
        # parameters; the policy itself is not a module.
        self.model = policy.model
        self.heads = policy.heads
        self._policy = (policy,)  # a tuple: not registered

    def forward(
        self,
        micro: MicroBatch,
        loss: Loss[Any],
        cfg: LearnerConfig,  # its mixed precision and word dropout
        train_actor: bool,  # False during the critic-only warm-up
    ) -> tuple[torch.Tensor, MicroBatchPart]:
        policy = self._policy[0]
        with (
            autocast(policy.device, cfg),
            policy.with_word_dropout(cfg.entity_dropout, cfg.word_dropout, cfg.phrasing_dropout),
        ):
            out = policy.evaluate(micro.batch)
        objective = loss(out, micro.batch, micro.mask, micro.inputs)
        actor_loss = objective.actor_loss
        actor_term = actor_loss * micro.step_share if train_actor else actor_loss.detach() * 0
        total = actor_term + objective.critic_loss * micro.row_share
        detached = replace(
            objective, actor_loss=actor_loss.detach(), critic_loss=objective.critic_loss.detach()
        )
        return total, MicroBatchPart(detached, out.known)


class Learner:
    """Trains a :class:`Policy` from stored step rows.

    ``policy_version`` is the version the learner's weights correspond to (the caller bumps it when
    it publishes); the batch's policy lag is measured against it. Separate AdamW optimisers (and
    learning rates) for the actor and the critics. On a pretrained base (``policy.config.base``)
    the actor's optimiser has two groups, the trained backbone weights at ``config.backbone_lr``
    (None: the base's default from policy.defaults) and the heads at ``actor_lr``, and a micro-batch holds
    ``PRETRAINED.micro_batch_size`` trajectories when ``config.micro_batch_size`` is None; the tiny
    default keeps one group and micro-batches of ``DEFAULT_MICRO_BATCH_SIZE``. An explicit
    ``config.micro_batch_size`` is honoured on either.
    """

    def __init__(
        self,
        policy: Policy,
        config: LearnerConfig | None = None,
        *,
        policy_version: int = 0,
    ) -> None:
        self.policy = policy
        policy.prepare_for_learning()
        self.config = config or LearnerConfig()
        self.policy_version = policy_version
        self.updates = 0
        self.task_stats = TaskStats()  # the MobileRL-style options' per-task counts
        torch.manual_seed(self.config.seed)
        cfg = self.config
        self.actor_optimizer = torch.optim.AdamW(
            self._actor_groups(), lr=cfg.actor_lr, weight_decay=cfg.weight_decay
        )
        self.micro_batch_size = self._micro_batch_size()
        self.critic_optimizer = torch.optim.AdamW(
            policy.critic_parameters(), lr=cfg.critic_lr, weight_decay=cfg.weight_decay
        )
        self.loss = make_loss(self.config)  # the algorithm's objective, with its slice of the config
        self.forward = MicroBatchLoss(policy)  # the policy's forward and that loss on a micro-batch
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

    def _actor_groups(self) -> list[dict[str, Any]]:
        backbone_lr = self.config.backbone_lr or training_defaults(self.policy.config).learner_backbone_lr
        return self.policy.actor_parameter_groups(self.config.actor_lr, backbone_lr)

    def _micro_batch_size(self) -> int:
        """The configured micro-batch; when None, the policy's default (16 trajectories in one
        graph do not fit in memory with a real LM)."""
        if self.config.micro_batch_size is not None:
            return self.config.micro_batch_size
        return training_defaults(self.policy.config).micro_batch_size or DEFAULT_MICRO_BATCH_SIZE

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

    def _proximal_logp(self, sub: StepBatch) -> torch.Tensor | None:
        """(b, t) log π of the rows' actions under the published average (None when the learner
        keeps none): decoupled PPO's "average" π_prox. Evaluated without word dropout: π_prox is the
        policy as collectors and evaluations run it."""
        if self.average is None:
            return None
        with torch.no_grad(), autocast(self.device, self.config), self.averaged() as policy:
            return policy.evaluate(sub).logp.detach()

    def update(self, batch: StepBatch) -> tuple[dict[str, float], np.ndarray]:
        """One optimisation step on a batch of trajectories (its IS weights, if any, weigh them).

        Returns the metrics and one new priority per trajectory, in the batch's row order (by
        ``sample_idx``: the draw order). From stored rows::

            metrics, priorities = learner.update(StepBatch.from_rows(rows, is_weights))
        """
        refuse_outer_autocast("Learner.update")
        started = time.perf_counter()
        batch = self._prepared(batch)
        mask = self._fresh_rows(batch)
        # Without a critic there is nothing to warm up.
        train_actor = self.updates >= self.config.critic_warmup_updates or not self.loss.traits.uses_critic
        self.actor_optimizer.zero_grad(set_to_none=True)
        self.critic_optimizer.zero_grad(set_to_none=True)
        # Before the split: what spans the batch (gigpo's groups) spans the micro-batches.
        inputs = self.loss.batch_inputs(batch, mask, self._proximal_logp)
        sums, priorities = self._accumulate_gradients(batch, mask, inputs, train_actor)
        grad_norms = self._optimiser_step(train_actor)
        if options_active(self.config):
            priorities = self.task_stats.reweigh(batch, priorities, sums, self.config, self.updates)
        metrics = {
            **sums,
            **grad_norms,
            **self._batch_metrics(batch, mask),
            "actor_trained": float(train_actor),
            "update_s": time.perf_counter() - started,
            **inputs.metrics(),
        }
        return metrics, priorities.numpy().astype(np.float64)

    def _prepared(self, batch: StepBatch) -> StepBatch:
        """The batch checked against the policy, on its device, with the MobileRL-style rewards."""
        history = self.policy.config.history
        if history > 0 and not batch.history_complete:
            raise ValueError(
                f"the policy shows {history} previous actions, but the batch holds windows that "
                "start mid-episode, so those actions are unknown; sample whole episodes (window=None)"
            )
        batch = batch.to(self.device)
        if options_active(self.config):  # count the batch's new episodes before their lengths set L_min
            self.task_stats.observe_batch(batch)
            batch = self.task_stats.shaped_rewards(batch, self.config)
        return batch

    def _micro_batches(
        self, batch: StepBatch, mask: torch.Tensor, inputs: BatchInputs[Any]
    ) -> Iterator[MicroBatch]:
        """This process's rows cut into micro-batches, each with its loss inputs and its shares of
        the whole batch's steps and rows (on several processes, learner/distributed.py, the totals
        stay those of the whole batch)."""
        total_steps = max(int(mask.sum()), 1)
        shard = range(batch.size) if self.parallel is None else self.parallel.rows(batch.size)
        for start in range(shard.start, shard.stop, self.micro_batch_size):
            rows = list(range(start, min(start + self.micro_batch_size, shard.stop)))
            sub = batch if len(rows) == batch.size else batch.select_rows(rows)
            sub_mask = mask if sub is batch else mask[rows][:, : sub.shape[1]]
            yield MicroBatch(
                rows, sub, sub_mask, inputs.rows(rows, sub),
                float(sub_mask.sum()) / total_steps, len(rows) / batch.size,
            )  # fmt: skip

    def _accumulate_gradients(
        self, batch: StepBatch, mask: torch.Tensor, inputs: BatchInputs[Any], train_actor: bool
    ) -> tuple[dict[str, float], torch.Tensor]:
        """Forward and backward over the micro-batches: the gradients add up to the batch's; the
        metric sums (each weighted by its micro-batch's share) and the (B,) new priorities."""
        sums: dict[str, float] = {}
        priorities = torch.zeros(batch.size)
        total_steps = max(int(mask.sum()), 1)
        parallel = self.parallel
        forward = self.forward if parallel is None else parallel.loss
        for micro in self._micro_batches(batch, mask, inputs):
            last = parallel is None or micro.rows[-1] == parallel.rows(batch.size).stop - 1
            with nullcontext() if parallel is None else parallel.sync(last=last):
                loss, part = forward(micro, self.loss, self.config, train_actor)
                # DDP averages the ranks' gradients; each rank's loss is its share times W, so
                # the average is the sum of the shares: the whole batch's gradient.
                (loss if parallel is None else loss * parallel.world).backward()
            priorities[micro.rows] = part.objective.priorities.float().cpu()
            unknown_share = float((micro.mask & ~part.known).sum()) / total_steps
            _add_micro_batch(sums, part, unknown_share, micro.step_share, micro.row_share)
        if parallel is not None:  # each rank filled its own rows of the priorities
            sums, priorities = parallel.sum_over_ranks(sums, priorities)
        return sums, priorities

    def _optimiser_step(self, train_actor: bool) -> dict[str, float]:
        """The gradient norms (clipped), the optimisers' steps, the weight average; counts the update."""
        cfg, policy = self.config, self.policy
        norms = {
            "grad_norm_actor": _grad_norm(policy.actor_parameters(), cfg.actor_grad_clip),
            "grad_norm_critic": _grad_norm(policy.critic_parameters(), cfg.critic_grad_clip),
        }
        if train_actor:
            self.actor_optimizer.step()
        self.critic_optimizer.step()
        if self.average is not None:
            self.average.update()
        self.updates += 1
        return norms

    def _batch_metrics(self, batch: StepBatch, mask: torch.Tensor) -> dict[str, float]:
        """The batch's lag, size and success, and the next draw's β."""
        # The lag of the steps trained on; rows past max_policy_lag were sampled but masked out
        # (used_step_fraction says how many), and their lag would hide what the losses saw.
        lags = (self.policy_version - batch.policy_versions).float()
        lag = lags[mask] if bool(mask.any()) else lags.new_zeros(1)
        return {
            "policy_lag_mean": float(lag.mean()),
            "policy_lag_max": float(lag.max()),
            "sampled_policy_lag_mean": float(lags[batch.mask].mean()),
            "used_step_fraction": float(mask.sum()) / max(int(batch.mask.sum()), 1),
            "trajectories": float(batch.size),
            "steps": float(batch.mask.sum()),
            "success_rate": float(batch.success.mean()),
            "beta": self.beta_at(),
        }


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


class Sampled(Protocol):
    """What one training step draws, one entry per trajectory in draw order: the replay's
    ``storage.replay_sample.SampleBatch`` as it is, or a :class:`Draw`."""

    @property
    def slots(self) -> np.ndarray: ...  # where each priority is written back (replay slots, episode indices)

    @property
    def steps(self) -> Any: ...  # step rows tagged with `sample_idx`: a pyarrow table or a list of dicts

    @property
    def is_weights(self) -> np.ndarray: ...  # importance-sampling weights


class Draw(NamedTuple):
    """A :class:`Sampled` batch built by hand (the in-memory replay, a follower rank's message)."""

    slots: np.ndarray
    steps: Any
    is_weights: np.ndarray


@dataclass(frozen=True)
class StepResult:
    metrics: dict[str, float]  # Learner.update's
    steps: int  # step rows trained on
    update_s: float  # the update and the write-back; the draw is the caller's to time


def train_step(
    learner: Learner,
    sample: Callable[[], Sampled],
    write_back: Callable[[np.ndarray, np.ndarray], None],
) -> StepResult:
    """Draw with `sample` (its exceptions, e.g. a replay not ready, pass through), update, and hand
    one new priority per trajectory to `write_back(slots, priorities)`; the learner task and the
    in-process loop (``simulators.local_loop``) both train through it."""
    draw = sample()
    started = time.perf_counter()
    batch = StepBatch.from_rows(draw.steps, draw.is_weights)
    metrics, priorities = learner.update(batch)
    write_back(draw.slots, priorities)
    return StepResult(metrics, batch.num_steps, time.perf_counter() - started)
