"""Success estimates a person can trust: several greedy episodes per task and a 95 % interval.

One greedy episode per held-out task (66 on General) gives an interval of about ±11 points, wider
than most of what RL changes; repeating every task under a few environment seeds (distractor
dialogs, start states) narrows it, and the same seeds give the same number on every re-run.
Two figures answer two questions: the held-out (test) split says whether the policy generalises,
the train tasks under fresh seeds ("in distribution") say whether it learned what it was trained on.

    >>> estimate = estimate_success(policy, load_tasks("general", "test"), env, episodes_per_task=3)
    >>> f"{estimate.success:.1%} [{estimate.ci_low:.1%}-{estimate.ci_high:.1%}]"
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from distrl_core.envs.protocol import Task
from simulators.rollout import ActFn, Actor, RolloutConfig, run_episodes
from simulators.sim_env import SimDroidEnvConfig

__all__ = [
    "HELDOUT_SEED",
    "IN_DISTRIBUTION_SEED",
    "SuccessEstimate",
    "estimate_success",
    "outcomes_from_text",
    "outcomes_to_text",
    "wilson_interval",
]

# Evaluation seeds are fixed and far from the collectors' (which derive from the run's seed), so an
# evaluation is exact on a re-run and "in distribution" means train tasks under unseen env seeds.
HELDOUT_SEED = 12345
IN_DISTRIBUTION_SEED = 777_001
_REPEAT_STRIDE = 7919  # seed offset between the repetitions of the task list


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval: sane at 0 and n, unlike the normal approximation."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class SuccessEstimate:
    """Outcomes of ``episodes_per_task`` greedy episodes on each task."""

    successes: int
    episodes: int
    episodes_per_task: int
    per_task: dict[str, float] = field(default_factory=dict)
    per_family: dict[str, float] = field(default_factory=dict)
    per_family_counts: dict[str, tuple[int, int]] = field(default_factory=dict)  # (successes, episodes)
    # Every episode's outcome in the protocol's fixed order (repetition, then task list order): two
    # versions evaluated alike pair up episode by episode (distrl_core.learner.champion).
    outcomes: tuple[bool, ...] = ()

    @property
    def success(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.successes, self.episodes)

    @property
    def ci_low(self) -> float:
        return self.interval[0]

    @property
    def ci_high(self) -> float:
        return self.interval[1]

    def as_dict(self) -> dict[str, Any]:
        return {
            "success": self.success,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "episodes": self.episodes,
            "episodes_per_task": self.episodes_per_task,
            "families": dict(self.per_family),
            "family_ci": {f: wilson_interval(*counts) for f, counts in self.per_family_counts.items()},
            "tasks": dict(self.per_task),
            "outcomes": outcomes_to_text(self.outcomes),
        }


def outcomes_to_text(outcomes: Sequence[bool]) -> str:
    """Outcomes as a compact "0110..." string (an MLflow tag, a JSON field)."""
    return "".join("1" if ok else "0" for ok in outcomes)


def outcomes_from_text(text: str) -> tuple[bool, ...]:
    if set(text) - {"0", "1"}:
        raise ValueError(f"outcomes must be a string of 0 and 1, got {text[:40]!r}")
    return tuple(ch == "1" for ch in text)


def estimate_from_outcomes(
    outcomes: Sequence[tuple[str, str, bool]], episodes_per_task: int
) -> SuccessEstimate:
    """From (family, task_id, success) triples, in the protocol's order."""
    per_task: dict[str, list[bool]] = defaultdict(list)
    per_family: dict[str, list[bool]] = defaultdict(list)
    for family, task_id, ok in outcomes:
        per_task[task_id].append(ok)
        per_family[family].append(ok)
    return SuccessEstimate(
        successes=sum(ok for _, _, ok in outcomes),
        episodes=len(outcomes),
        episodes_per_task=episodes_per_task,
        per_task={t: sum(v) / len(v) for t, v in sorted(per_task.items())},
        per_family={f: sum(v) / len(v) for f, v in sorted(per_family.items())},
        per_family_counts={f: (sum(v), len(v)) for f, v in sorted(per_family.items())},
        outcomes=tuple(ok for _, _, ok in outcomes),
    )


def estimate_success(
    policy: Actor | ActFn,
    tasks: Sequence[Task],
    env: SimDroidEnvConfig | None = None,
    *,
    episodes_per_task: int = 3,
    seed: int = HELDOUT_SEED,
    parallel: int = 16,
    policy_version: int = 0,
) -> SuccessEstimate:
    """Greedy success over every task, ``episodes_per_task`` times under different env seeds.

    Deterministic for a given policy, task list and ``seed`` (the rollout draws reset seeds from
    ``seed`` alone), whatever the run, the wall-clock or the thread count."""
    if episodes_per_task < 1:
        raise ValueError(f"episodes_per_task must be >= 1, got {episodes_per_task}")
    tasks = list(tasks)
    outcomes: list[tuple[str, str, bool]] = []
    family_of = {t.task_id: t.family for t in tasks}
    for repeat in range(episodes_per_task):
        config = RolloutConfig(
            greedy=True,
            seed=seed + _REPEAT_STRIDE * repeat,
            parallel_envs=parallel,
            run_id=f"eval-{seed}-{repeat}",
            pool="eval",
            policy_version=policy_version,
        )
        if env is not None:
            config = replace(config, env=env)
        result = run_episodes(policy, tasks, config)
        # Episodes finish in any order; the protocol's order is the task list's.
        done = {e.task_id: e.success for e in result.episodes}
        outcomes += [(family_of[t.task_id], t.task_id, done[t.task_id]) for t in tasks if t.task_id in done]
    return estimate_from_outcomes(outcomes, episodes_per_task)
