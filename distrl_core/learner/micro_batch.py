"""One micro-batch's forward pass and loss, as a module.

A single-process learner calls it directly; a learner on several processes calls it through
``DistributedDataParallel`` (``learner/distributed.py``), which needs an ``nn.Module`` whose call
returns the loss, to hook the gradient all-reduce into its backward::

    loss, part = MicroBatchLoss(policy)(micro, learner.loss, config, train_actor)
    loss.backward()
    part.objective.priorities  # (b,)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from distrl_core.learner.batch import StepBatch
from distrl_core.learner.config import LearnerConfig
from distrl_core.learner.losses import Loss, Objective
from distrl_core.policy.model import Policy

__all__ = ["MicroBatch", "MicroBatchLoss", "MicroBatchPart"]


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


def autocast(device: torch.device, cfg: LearnerConfig) -> torch.autocast:
    """bfloat16 only on CUDA: CPU autocast is slower than float32 on the tiny model, and the
    learner's tests compare CPU updates to 1e-6."""
    return torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda" and cfg.mixed_precision)
