"""An in-process training loop on SimDroid: collect with the current policy, replay, update, evaluate.

It is the smallest complete instance of the system (one collector, one learner, no storage) and
what the learning test and ``bench/learning_curve.py`` run. The distributed system replaces
``InMemoryReplay`` with the DuckDB replay over Parquet shards and the rollout with collectors.
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from distrl_core.envs.protocol import Task
from distrl_core.learner.groups import group_tasks, sample_groups
from distrl_core.learner.learner import Draw, Learner, train_step
from distrl_core.learner.losses import loss_type
from distrl_core.learner.task_stats import options_active
from simulators.evaluation import HELDOUT_SEED, IN_DISTRIBUTION_SEED, estimate_success
from simulators.rollout import ActFn, Actor, RolloutConfig, RolloutResult, run_episodes
from simulators.sim_env import SimDroidEnvConfig
from simulators.simdroid.device import SimDroidConfig
from simulators.simdroid.paraphrase import paraphrase_tasks, validate_probability
from simulators.simdroid.tasks import load_tasks

__all__ = ["InMemoryReplay", "LoopConfig", "RoundResult", "evaluate_success", "train_rounds"]


class InMemoryReplay:
    """Trajectories with priorities; draws with replacement in proportion to priority**alpha and
    returns IS weights (N·P(i))^-β / max. The newest ``capacity`` trajectories are kept."""

    def __init__(self, capacity: int = 2000, alpha: float = 0.6, seed: int = 0) -> None:
        if capacity < 1 or alpha < 0:
            raise ValueError("InMemoryReplay needs capacity >= 1 and alpha >= 0")
        self.capacity, self.alpha = capacity, alpha
        self.episodes: list[list[dict[str, Any]]] = []
        self.priorities: list[float] = []
        self._rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return len(self.episodes)

    def add(self, rows: Sequence[dict[str, Any]]) -> int:
        by_episode: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            # Only "ok" episodes are trained on (storage.schema), as the DuckDB replay does; an
            # env_error episode may be a single outage row with no observation.
            if row["episode_status"] == "ok":
                by_episode.setdefault(row["episode_id"], []).append(row)
        top = max(self.priorities, default=1.0)
        for episode in by_episode.values():
            self.episodes.append(sorted(episode, key=lambda r: r["step"]))
            self.priorities.append(top)  # new data is seen at least once soon
        overflow = len(self.episodes) - self.capacity
        if overflow > 0:
            del self.episodes[:overflow], self.priorities[:overflow]
        return len(by_episode)

    def sample(self, size: int, beta: float) -> tuple[np.ndarray, list[dict[str, Any]], np.ndarray]:
        """(indices, step rows tagged with ``sample_idx``, IS weights)."""
        weights = np.asarray(self.priorities, dtype=np.float64) ** self.alpha
        probabilities = weights / weights.sum()
        picks = self._rng.choice(len(self.episodes), size=size, p=probabilities)
        is_weights = (len(self.episodes) * probabilities[picks]) ** (-beta)
        rows = [{**row, "sample_idx": i} for i, pick in enumerate(picks) for row in self.episodes[pick]]
        return picks, rows, is_weights / is_weights.max()

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        for index, priority in zip(indices.tolist(), priorities.tolist(), strict=True):
            self.priorities[index] = float(priority)


@dataclass
class LoopConfig:
    """Settings of ``train_rounds``.

    - ``family``: SimDroid family trained and evaluated on. ``eval_tasks``: held-out tasks per
      evaluation (None = the whole test split of the family), evaluated greedily.
    - ``rounds``: collect/update rounds. ``episodes_per_round``: environment episodes per round
      (the budget that makes methods comparable). ``updates_per_round``/``batch_size``: learner
      updates per round and trajectories per update. ``min_replay``: episodes before updating.
    - ``env_step_budget``: stop after the round in which this many environment steps were taken
      (None: run all ``rounds``); what makes methods comparable at equal experience.
    - ``train_eval_tasks``: also evaluate greedily on this many train tasks per round (0 = skip).
    - ``replay_capacity``/``alpha``: the in-memory replay (α only matters for A-RIDE's priorities).
    - ``env``: the environment (distractor dialogs on at 10%, as SimDroidEnv's default).
    - ``eval_episodes_per_task``: greedy episodes per held-out task in each evaluation (different
      env seeds; more narrow the interval, see learner/evaluation.py).
    - ``group_size`` (an algorithm whose loss needs groups: gigpo): each round collects
      ``episodes_per_round // group_size`` groups of this many episodes of one task under one env
      seed, and each update trains on ``batch_size // group_size`` whole groups drawn uniformly
      (learner.groups).
    - ``behaviour_lag``: collect with the published weights of this many versions ago (a learner
      slowed on purpose, as collectors far behind it; bench/staleness.py). The rows carry that old
      version, so set ``LearnerConfig.max_policy_lag`` to at least this, or they are masked out.
    - ``seed``: task order, rollouts and replay sampling.
    - ``paraphrase``: probability (0-1) that a collected episode's instruction is replaced by a
      paraphrase (``simulators.simdroid.paraphrase``; its own random stream, so 0 collects as
      before); evaluations, the train-task probe included, keep the tasks' own instructions.

    Collection and evaluation use the learner's published weights (``Learner.averaged``), as the
    distributed collectors and evaluations do.
    """

    family: str = "general"
    eval_tasks: int | None = None
    rounds: int = 10
    episodes_per_round: int = 32
    updates_per_round: int = 8
    batch_size: int = 16
    min_replay: int = 16
    train_eval_tasks: int = 0
    env_step_budget: int | None = None
    replay_capacity: int = 2000
    alpha: float = 0.6
    parallel_envs: int = 16
    eval_episodes_per_task: int = 1
    group_size: int = 4
    behaviour_lag: int = 0
    env: SimDroidEnvConfig = field(
        default_factory=lambda: SimDroidEnvConfig(
            device=SimDroidConfig(distractor_prob=0.1), screenshots=False, ui_xml=False
        )
    )
    seed: int = 0
    paraphrase: float = 0.0

    def __post_init__(self) -> None:
        validate_probability("LoopConfig", self.paraphrase)


@dataclass(frozen=True)
class RoundResult:
    round: int
    env_steps: int
    episodes: int
    train_success: float  # of the episodes collected this round (sampled actions)
    heldout_success: float  # greedy, on the family's test split
    train_greedy_success: float | None
    updates: int
    seconds: float
    metrics: dict[str, float]


def evaluate_success(
    policy: Actor | ActFn,
    tasks: Sequence[Task],
    env: SimDroidEnvConfig,
    *,
    seed: int = HELDOUT_SEED,
    parallel: int = 16,
    episodes_per_task: int = 1,
) -> float:
    """Greedy success rate over ``tasks`` (``episodes_per_task`` episodes each)."""
    return estimate_success(
        policy, tasks, env, episodes_per_task=episodes_per_task, seed=seed, parallel=parallel
    ).success


def train_rounds(
    learner: Learner,
    config: LoopConfig,
    on_round: Callable[[RoundResult], None] | None = None,
    *,
    train_tasks: Sequence[Task] | None = None,
    test_tasks: Sequence[Task] | None = None,
) -> list[RoundResult]:
    """Round 0 evaluates the starting policy; each later round collects, updates, evaluates.

    ``train_tasks``/``test_tasks`` replace the family's train/test splits (e.g. a validation split
    carved out of the train split, so that tuning never looks at the test split)."""
    train_tasks = list(train_tasks) if train_tasks is not None else load_tasks(config.family, "train")
    test_tasks = list(test_tasks) if test_tasks is not None else load_tasks(config.family, "test")
    if config.eval_tasks is not None:
        test_tasks = test_tasks[: config.eval_tasks]
    rng = np.random.default_rng(config.seed)
    replay = InMemoryReplay(config.replay_capacity, config.alpha, seed=config.seed)
    started = time.perf_counter()
    evaluate = _evaluator(learner, config, test_tasks, _train_probe(train_tasks, config.train_eval_tasks))
    results = [RoundResult(0, 0, 0, 0.0, *evaluate(), 0, 0.0, {})]
    if on_round:
        on_round(results[0])
    env_steps = episodes = 0
    published = _Published(learner, config.behaviour_lag)
    rephrase = random.Random(f"paraphrase/{config.seed}")
    for round_index in range(1, config.rounds + 1):
        collected = _collect_round(learner, config, train_tasks, rng, published, rephrase)
        replay.add(collected.rows)
        if options_active(learner.config):  # every collected episode counts, not just the replayed
            ok = [e for e in collected.episodes if e.status == "ok"]
            learner.task_stats.observe(
                [e.episode_id for e in ok], [e.task_id for e in ok], [float(e.success) for e in ok],
                [e.steps for e in ok],
            )  # fmt: skip
        env_steps += collected.num_steps
        episodes += len(collected.episodes)
        metrics = _update_round(learner, config, replay, rng) if len(replay) >= config.min_replay else {}
        published.remember()
        result = RoundResult(
            round_index, env_steps, episodes, collected.success_rate, *evaluate(), learner.updates,
            time.perf_counter() - started, metrics,
        )  # fmt: skip
        results.append(result)
        if on_round:
            on_round(result)
        if config.env_step_budget is not None and env_steps >= config.env_step_budget:
            break
    return results


def _train_probe(train_tasks: Sequence[Task], count: int) -> list[Task]:
    """``count`` train tasks spread evenly over the split (none when ``count`` is 0)."""
    return list(train_tasks[:: max(1, len(train_tasks) // max(count, 1))][:count])


def _evaluator(
    learner: Learner, config: LoopConfig, test_tasks: Sequence[Task], train_probe: Sequence[Task]
) -> Callable[[], tuple[float, float | None]]:
    """(held-out success, train-probe success or None), greedy, with the published weights."""

    def evaluate() -> tuple[float, float | None]:
        with learner.averaged() as policy:
            heldout = evaluate_success(
                policy,
                test_tasks,
                config.env,
                parallel=config.parallel_envs,
                episodes_per_task=config.eval_episodes_per_task,
            )
            if not train_probe:
                return heldout, None
            return heldout, evaluate_success(
                policy, train_probe, config.env, parallel=config.parallel_envs, seed=IN_DISTRIBUTION_SEED
            )

    return evaluate


class _Published:
    """The last ``lag + 1`` published versions' weights, to act with one ``lag`` versions old."""

    def __init__(self, learner: Learner, lag: int) -> None:
        if lag < 0:
            raise ValueError(f"behaviour_lag={lag} must be >= 0 (versions behind the learner)")
        self.learner, self.lag = learner, lag
        self.versions: deque[tuple[int, list[torch.Tensor]]] = deque(maxlen=lag + 1)
        self.remember()

    def _parameters(self) -> list[torch.nn.Parameter]:
        return self.learner.policy.actor_parameters() + self.learner.policy.critic_parameters()

    def remember(self) -> None:
        if self.lag > 0:
            with self.learner.averaged():
                self.versions.append(
                    (self.learner.policy_version, [p.detach().clone() for p in self._parameters()])
                )

    @contextmanager
    def acting(self) -> Iterator[tuple[Any, int]]:
        """(policy, its version): the published weights ``lag`` versions old (the oldest kept
        while fewer exist); the learner's weights are back after the block, bit for bit."""
        with self.learner.averaged() as policy:
            if self.lag == 0:
                yield policy, self.learner.policy_version
                return
            version, weights = self.versions[0]
            current = [p.detach().clone() for p in self._parameters()]
            with torch.no_grad():
                for parameter, old in zip(self._parameters(), weights, strict=True):
                    parameter.copy_(old)
            try:
                yield policy, version
            finally:
                with torch.no_grad():
                    for parameter, saved in zip(self._parameters(), current, strict=True):
                        parameter.copy_(saved)


def _collect_round(
    learner: Learner,
    config: LoopConfig,
    train_tasks: Sequence[Task],
    rng: np.random.Generator,
    published: _Published,
    rephrase: random.Random | None = None,
) -> RolloutResult:
    """One round's episodes with the published weights: random train tasks (weighted by the failure
    curriculum when it is on), or (an algorithm that needs groups: gigpo) groups of one task under
    one reset seed."""
    reset_seeds = None
    probabilities = None  # uniform, drawn as before the curriculum existed (same random stream)
    if learner.config.failure_curriculum_attempts > 0:
        weights = learner.task_stats.task_weights([t.task_id for t in train_tasks], learner.config).numpy()
        probabilities = weights / weights.sum()
    if loss_type(learner.config.algorithm).traits.needs_groups:
        tasks, reset_seeds = group_tasks(
            train_tasks, config.episodes_per_round, config.group_size, rng, probabilities
        )
    elif probabilities is None:
        tasks = [train_tasks[i] for i in rng.integers(len(train_tasks), size=config.episodes_per_round)]
    else:
        picks = rng.choice(len(train_tasks), size=config.episodes_per_round, p=probabilities)
        tasks = [train_tasks[i] for i in picks]
    if rephrase is not None:  # same ids and params: the curriculum and groups see the tasks as picked
        tasks = paraphrase_tasks(tasks, config.paraphrase, rephrase)
    with published.acting() as (policy, version):
        rollout = RolloutConfig(
            env=config.env,
            parallel_envs=config.parallel_envs,
            seed=int(rng.integers(2**31)),
            policy_version=version,
        )
        return run_episodes(policy, tasks, rollout, reset_seeds=reset_seeds)


def _update_round(
    learner: Learner, config: LoopConfig, replay: InMemoryReplay, rng: np.random.Generator
) -> dict[str, float]:
    """``updates_per_round`` training steps; their metrics averaged. The weights then count as a new
    version (what the next round's episodes are collected with)."""
    if loss_type(learner.config.algorithm).traits.needs_groups:

        def sample() -> Draw:
            groups = config.batch_size // config.group_size
            # Priorities differ only through the MobileRL-style multipliers; off, draw as before.
            priorities = replay.priorities if options_active(learner.config) else None
            return Draw(*sample_groups(replay.episodes, groups, rng, priorities))

    else:

        def sample() -> Draw:
            return Draw(*replay.sample(config.batch_size, learner.beta_at()))

    means: dict[str, float] = {}
    for _ in range(config.updates_per_round):
        step = train_step(learner, sample, replay.update_priorities)
        for name, value in step.metrics.items():
            means[name] = means.get(name, 0.0) + value / config.updates_per_round
    learner.policy_version += 1
    return means
