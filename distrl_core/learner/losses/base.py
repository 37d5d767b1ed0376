"""What every algorithm's loss is made of: the `Loss` interface and its `Objective`, its `Traits`,
the config slices several losses read, and the pieces of math they share (the critics, Retrace's
targets, DPER priorities, the advantages' normalisation and the actor's entropy bonus and penalties).

A loss owns a frozen dataclass of exactly the `LearnerConfig` fields it reads (its slice; nested
slices are shared pieces, their leaves are `LearnerConfig` field names), built by `config_slice`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, is_dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar, get_type_hints

import torch

from distrl_core.algos.losses import ActorTerms, critic_loss, trajectory_critic_loss
from distrl_core.algos.masking import masked_mean
from distrl_core.algos.priorities import dper_priority
from distrl_core.algos.ratios import importance_ratios
from distrl_core.algos.retrace import RetraceTargets, discounted_returns, retrace_targets
from distrl_core.learner.batch import StepBatch
from distrl_core.policy.types import EvalOutput

InputsT = TypeVar("InputsT")
InputsT_co = TypeVar("InputsT_co", covariant=True)
SliceT = TypeVar("SliceT")

ProximalLogp = Callable[[StepBatch], torch.Tensor | None]
"""(b, t) log π of these rows' actions under the learner's published average, evaluated without
gradient (None when the learner keeps no average): what decoupled PPO's "average" proximal policy
reads. The learner passes it to `Loss.batch_inputs`."""


@dataclass
class Objective:
    actor_loss: torch.Tensor  # ()
    critic_loss: torch.Tensor  # ()
    priorities: torch.Tensor  # (B,) detached
    stats: dict[str, torch.Tensor]  # detached scalars for the metrics


@dataclass(frozen=True)
class Traits:
    """What the rest of the learner must do for an algorithm (no code outside the losses tests an
    algorithm's name).

    - ``uses_critic``: it trains the value heads, so the actor waits ``critic_warmup_updates``
      updates for them; without a critic the actor trains from the first update.
    - ``needs_groups``: its advantages compare the episodes of one task within a batch: they are
      computed on the whole batch before the micro-batches (``Loss.batch_inputs``), and the local
      loop collects and samples groups of one task (``group_size``).
    - ``needs_whole_episodes``: it reads whole episodes' returns, so the learner task refuses a
      ``window`` that samples pieces of episodes.
    - ``needs_proximal``: it reads log π_prox of the rows' actions (decoupled PPO's proximal policy).
    """

    uses_critic: bool = True
    needs_groups: bool = False
    needs_whole_episodes: bool = False
    needs_proximal: bool = False


class BatchInputs(Protocol[InputsT_co]):
    """A loss's inputs beyond the evaluated rows, computed once on the whole batch."""

    def rows(self, rows: Sequence[int], sub: StepBatch) -> InputsT_co:
        """The inputs of the micro-batch `sub` (rows `rows` of the batch, padding trimmed to
        `sub.shape`); called before the micro-batch's forward pass."""
        ...

    def metrics(self) -> dict[str, float]:
        """Whole-batch metrics the inputs add to the update's."""
        ...


class NoInputs:
    """The inputs of a loss that reads nothing beyond the evaluated rows."""

    def rows(self, rows: Sequence[int], sub: StepBatch) -> None:
        return None

    def metrics(self) -> dict[str, float]:
        return {}


class Loss(ABC, Generic[InputsT]):
    """One algorithm's training objective on an evaluated micro-batch.

    ``batch_inputs(batch, mask, proximal)`` runs once per update on the whole batch (before it is
    split); its ``rows(...)`` gives each micro-batch's typed extra inputs, which ``__call__`` reads::

        loss = ARideLoss.from_config(learner_config)
        inputs = loss.batch_inputs(batch, mask, proximal).rows(range(batch.size), batch)
        objective = loss(policy.evaluate(batch), batch, mask, inputs)
    """

    traits: ClassVar[Traits] = Traits()
    slice_type: ClassVar[type[Any]]  # the frozen dataclass of the fields the loss reads

    def __init__(self, config: Any) -> None:
        if not isinstance(config, self.slice_type):
            raise TypeError(f"{type(self).__name__} takes a {self.slice_type.__name__}, got {config!r}")
        self.config = config

    @classmethod
    def from_config(cls, values: object) -> Loss[InputsT]:
        """The loss with its slice of `values` (a `LearnerConfig`)."""
        return cls(config_slice(cls.slice_type, values))

    @abstractmethod
    def batch_inputs(
        self, batch: StepBatch, mask: torch.Tensor, proximal: ProximalLogp
    ) -> BatchInputs[InputsT]:
        """The loss's inputs on the whole batch; `mask` (B, T) the steps the losses use."""

    @abstractmethod
    def __call__(self, out: EvalOutput, batch: StepBatch, mask: torch.Tensor, inputs: InputsT) -> Objective:
        """The objective on the rows `batch` evaluated as `out`; `mask` (b, t) the steps it uses."""


class RowLoss(Loss[None]):
    """A loss that reads nothing beyond the evaluated rows."""

    def batch_inputs(self, batch: StepBatch, mask: torch.Tensor, proximal: ProximalLogp) -> NoInputs:
        return NoInputs()


def config_slice(kind: type[SliceT], values: object) -> SliceT:
    """`kind` (a dataclass) filled from the attributes of `values` of its fields' names; a field
    whose type is a dataclass is filled the same way (a shared piece of the slice)."""
    hints = get_type_hints(kind)
    kwargs = {
        f.name: config_slice(hints[f.name], values)
        if is_dataclass(hints[f.name])
        else getattr(values, f.name)
        for f in fields(kind)  # type: ignore[arg-type]
    }
    return kind(**kwargs)


def slice_fields(kind: type[Any]) -> frozenset[str]:
    """The `LearnerConfig` field names a slice reads (its leaves)."""
    hints = get_type_hints(kind)
    names: set[str] = set()
    for f in fields(kind):
        names |= slice_fields(hints[f.name]) if is_dataclass(hints[f.name]) else {f.name}
    return frozenset(names)


# --- shared slices and the math that reads them --------------------------------------------------


@dataclass(frozen=True)
class ActorTermsConfig:
    """The entropy bonus and penalties every policy-gradient actor loss adds (``algos.ActorTerms``)."""

    entropy_coef: float
    invalid_penalty: float
    repeat_penalty: float

    def terms(self, out: EvalOutput, batch: StepBatch) -> ActorTerms:
        return ActorTerms(
            entropy=out.entropy, invalid=batch.invalid, repeat=batch.repeat,
            entropy_coef=self.entropy_coef, invalid_penalty=self.invalid_penalty,
            repeat_penalty=self.repeat_penalty,
        )  # fmt: skip


@dataclass(frozen=True)
class CriticConfig:
    """The critics' loss: the step critic's regression plus the trajectory critic's BCE."""

    trajectory_critic_coef: float


@dataclass(frozen=True)
class RetraceConfig:
    """Retrace's targets and advantages (A-RIDE; decoupled PPO with ``decoupled_retrace``)."""

    gamma: float
    lam: float
    rho_max: float
    c_max: float


@dataclass(frozen=True)
class DPERConfig:
    """DPER's priority p = w1·mean|δ| + w2·mean ρ̄ + w3·mean H + ε."""

    w1: float
    w2: float
    w3: float
    priority_eps: float


@dataclass(frozen=True)
class AdvantageConfig:
    """How the advantages are shaped before they weight log π (A-RIDE, decoupled PPO)."""

    normalize_advantages: bool
    positive_advantages_only: bool


def bootstrap(values: torch.Tensor, batch: StepBatch, mask: torch.Tensor) -> torch.Tensor:
    """(B,) value after each row: 0 after a done step; for a window cut before the episode's end,
    the critic's value of the window's last state (the next state is not in the batch)."""
    last = mask.sum(dim=1).clamp(min=1) - 1
    rows = torch.arange(values.shape[0], device=values.device)
    ended = batch.dones[rows, last] > 0
    return torch.where(ended, torch.zeros_like(last, dtype=values.dtype), values.detach()[rows, last])


def returns_targets(out: EvalOutput, batch: StepBatch, mask: torch.Tensor, gamma: float) -> torch.Tensor:
    """(B, T) discounted returns, bootstrapped from the critic where a window ends mid-episode:
    the critic targets of the losses without Retrace."""
    return discounted_returns(
        batch.rewards, batch.dones, mask, gamma, bootstrap(out.values.detach(), batch, mask)
    )


def critics(
    out: EvalOutput, targets: torch.Tensor, batch: StepBatch, mask: torch.Tensor, cfg: CriticConfig
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The critic loss and its two parts (detached, for the metrics)."""
    step = critic_loss(out.values, targets, mask, batch.is_weights)
    trajectory = trajectory_critic_loss(out.traj_logits, batch.success)
    loss = step + cfg.trajectory_critic_coef * trajectory
    return loss, {"critic_step": step.detach(), "critic_traj": trajectory.detach()}


def shaped_advantages(
    advantages: torch.Tensor, actor_mask: torch.Tensor, cfg: AdvantageConfig
) -> torch.Tensor:
    """Centred and scaled over the batch's real steps (``normalize_advantages``): a critic that lags
    the policy biases every advantage one way, which would push all sampled actions up (or down)
    together; then their positive part (``positive_advantages_only``): the signed steps of failed
    episodes push this policy's mass off correct candidates until it solves nothing."""
    if cfg.normalize_advantages:
        mean = masked_mean(advantages, actor_mask)
        std = torch.sqrt(masked_mean((advantages - mean).square(), actor_mask))
        advantages = torch.where(actor_mask, (advantages - mean) / std.clamp(min=1e-6), advantages)
    if cfg.positive_advantages_only:
        advantages = advantages.clamp(min=0.0)
    return advantages


def retrace(
    out: EvalOutput, batch: StepBatch, mask: torch.Tensor, cfg: RetraceConfig
) -> tuple[torch.Tensor, RetraceTargets]:
    """ρ = π/μ (B, T) and Retrace's targets, advantages and TD errors on these rows."""
    rho = importance_ratios(out.logp, batch.logp_mu, mask)
    values = out.values.detach()
    targets = retrace_targets(
        values, batch.rewards, batch.dones, rho, mask, bootstrap(values, batch, mask),
        gamma=cfg.gamma, lam=cfg.lam, rho_max=cfg.rho_max, c_max=cfg.c_max,
    )  # fmt: skip
    return rho, targets


def dper(targets: RetraceTargets, out: EvalOutput, mask: torch.Tensor, cfg: DPERConfig) -> torch.Tensor:
    """(B,) DPER priorities from Retrace's TD errors, truncated ratios and the policy's entropy."""
    return dper_priority(
        targets.td_errors, targets.rho_bar, out.entropy.detach(), mask,
        w1=cfg.w1, w2=cfg.w2, w3=cfg.w3, eps=cfg.priority_eps,
    )  # fmt: skip


def uniform_priorities(mask: torch.Tensor) -> torch.Tensor:
    """(B,) ones: a prioritized replay then samples the rows uniformly (the baselines)."""
    return torch.ones(mask.shape[0], device=mask.device)
