"""Per-task outcome counts for the MobileRL-style options, and the thin wiring of those options into
an update (``algos.mobilerl`` holds their math; docs/architecture.md, "MobileRL-style options").

The learner counts each episode once (by id), whether it first meets it in a sampled batch (the
distributed learner) or is told of it when it is collected (``observe``: the local loop, whose
counts are then unbiased by the replay's priorities). It keeps the ids of the last ``memory``
episodes only, so a long run's memory stays bounded; an episode sampled again after that is counted
again, which only nudges the rates.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace

import torch

from distrl_core.algos.mobilerl import (
    failure_curriculum_weights,
    positive_replay_multiplier,
    shortest_path_rewards,
)
from distrl_core.learner.batch import StepBatch
from distrl_core.learner.config import LearnerConfig

__all__ = ["TaskStats", "options_active"]


def options_active(cfg: LearnerConfig) -> bool:
    """Whether any MobileRL-style option is on (off, the learner skips this module entirely)."""
    return (
        cfg.positive_replay_strength > 0
        or cfg.failure_curriculum_attempts > 0
        or cfg.shortest_path_exponent > 0
    )


class TaskStats:
    """Attempts, successes and the shortest successful length of each task."""

    def __init__(self, memory: int = 200_000) -> None:
        self.attempts: dict[str, int] = {}
        self.successes: dict[str, int] = {}
        self.shortest: dict[str, int] = {}
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._memory = memory

    def observe(
        self,
        episode_ids: Sequence[str],
        task_ids: Sequence[str],
        success: Sequence[float],
        lengths: Sequence[int | None],  # steps of the whole episode; None when unknown (a window)
    ) -> None:
        for episode, task, ok, length in zip(episode_ids, task_ids, success, lengths, strict=True):
            if episode in self._seen:
                continue
            self._seen[episode] = None
            if len(self._seen) > self._memory:
                self._seen.popitem(last=False)
            self.attempts[task] = self.attempts.get(task, 0) + 1
            if ok:
                self.successes[task] = self.successes.get(task, 0) + 1
                if length is not None and length > 0:
                    self.shortest[task] = min(self.shortest.get(task, length), length)

    def observe_batch(self, batch: StepBatch) -> None:
        """Count a batch's episodes; a row's length counts as its episode's only for whole episodes."""
        lengths = batch.mask.sum(dim=1).tolist()
        ended = (batch.dones * batch.mask).sum(dim=1).gt(0).tolist()
        whole = [
            int(n) if batch.history_complete and e else None for n, e in zip(lengths, ended, strict=True)
        ]
        self.observe(batch.episode_ids, batch.task_ids, batch.success.tolist(), whole)

    def success_rates(self, task_ids: Sequence[str]) -> torch.Tensor:  # (B,) float64
        """p̂ = (successes + 1) / (attempts + 2): one lucky success is not yet an easy task."""
        return torch.tensor(
            [(self.successes.get(t, 0) + 1) / (self.attempts.get(t, 0) + 2) for t in task_ids],
            dtype=torch.float64,
        )

    def task_weights(self, task_ids: Sequence[str], cfg: LearnerConfig) -> torch.Tensor:  # (K,) float64
        """The failure curriculum's weight of each task (all 1 when the option is off)."""
        if cfg.failure_curriculum_attempts <= 0:
            return torch.ones(len(task_ids), dtype=torch.float64)
        return failure_curriculum_weights(
            torch.tensor([self.attempts.get(t, 0) for t in task_ids]),
            torch.tensor([self.successes.get(t, 0) for t in task_ids]),
            min_attempts=cfg.failure_curriculum_attempts,
            floor=cfg.failure_curriculum_floor,
        )

    def reset_unsolved(self) -> int:
        """Forget the counts of the tasks never solved (they are retried at full weight); how many."""
        unsolved = [t for t in self.attempts if self.successes.get(t, 0) == 0]
        for task in unsolved:
            del self.attempts[task]
        return len(unsolved)

    def shaped_rewards(self, batch: StepBatch, cfg: LearnerConfig) -> StepBatch:
        """The batch with its success rewards scaled by the shortest-path factor (off: unchanged)."""
        if cfg.shortest_path_exponent <= 0:
            return batch
        if not batch.history_complete:
            raise ValueError(
                "shortest_path_exponent > 0 scales a success by its episode's length, but the batch holds "
                "windows of episodes; sample whole episodes (window=None) or set it to 0"
            )
        lengths = batch.mask.sum(dim=1)
        shortest = torch.tensor(
            [self.shortest.get(t, int(n)) for t, n in zip(batch.task_ids, lengths.tolist(), strict=True)],
            dtype=batch.rewards.dtype,
            device=batch.rewards.device,
        )
        rewards = shortest_path_rewards(
            batch.rewards, batch.mask, batch.success, shortest, exponent=cfg.shortest_path_exponent
        )
        return replace(batch, rewards=rewards)

    def priority_multipliers(self, batch: StepBatch, cfg: LearnerConfig) -> torch.Tensor:  # (B,) float64
        """Positive replay × failure curriculum, per row (all 1 when both are off)."""
        factor = self.task_weights(batch.task_ids, cfg)
        if cfg.positive_replay_strength > 0:
            factor = factor * positive_replay_multiplier(
                batch.success.detach().cpu().to(torch.float64),
                self.success_rates(batch.task_ids),
                strength=cfg.positive_replay_strength,
            )
        return factor

    def reweigh(
        self,
        batch: StepBatch,
        priorities: torch.Tensor,
        sums: dict[str, float],
        cfg: LearnerConfig,
        updates: int,
    ) -> torch.Tensor:
        """The priorities times the MobileRL-style multipliers; the failure curriculum's periodic
        reset of never-solved tasks (`updates`: the learner's count, this update included)."""
        multipliers = self.priority_multipliers(batch, cfg)
        sums["priority_multiplier_mean"] = float(multipliers.mean())
        reset = cfg.failure_curriculum_reset_updates
        if cfg.failure_curriculum_attempts > 0 and reset > 0 and updates % reset == 0:
            sums["curriculum_tasks_reset"] = float(self.reset_unsolved())
        return priorities * multipliers.to(priorities.dtype)
