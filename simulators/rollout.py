"""Run an actor in environments (SimDroid, or ADB devices) and return step rows in the trajectory
schema, plus per-episode facts.

Several environments step in lock-step so that the policy acts on a batch of observations per
call. Rows are plain dicts with exactly the columns of ``storage.schema.STEP_SCHEMA`` (this module
cannot import storage; ``tests/learner`` checks the two agree), ready for
``storage.schema.steps_to_table`` or a ``ShardWriter``.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from distrl_core.envs.action_rules import utf8_safe
from distrl_core.envs.actions import Action, format_action
from distrl_core.envs.kinds import EnvKind
from distrl_core.envs.observation import Observation
from distrl_core.envs.protocol import Environment, Task
from distrl_core.envs.screen import as_executed, observation_kind
from distrl_core.policy.types import ActOutput
from simulators.factory import make_sim_envs
from simulators.sim_env import SimDroidEnvConfig
from simulators.simdroid.tasks import get_task

log = logging.getLogger(__name__)

__all__ = [
    "Actor",
    "EpisodeSummary",
    "RolloutConfig",
    "RolloutResult",
    "expert_actor",
    "run_episodes",
    "step_row",
]


@runtime_checkable
class Actor(Protocol):
    def act(self, observations: Sequence[Observation], *, greedy: bool = False) -> list[ActOutput]: ...


@dataclass
class RolloutConfig:
    """Settings of a rollout.

    - ``env``: the SimDroid environment (screenshots off by default: text policies do not need them
      and rendering is the slowest part of a step).
    - ``parallel_envs``: environments stepped together; the actor sees one batch per step.
    - ``greedy``: act by argmax (evaluation) instead of sampling (collection).
    - ``seed``: seeds episode ids and each episode's device RNG (distractors).
    - ``run_id``/``pool``/``collector_id``/``policy_name``/``policy_version``: recorded in every row.
    - ``max_reset_failures``: consecutive failed resets after which an environment is taken out of
      the rollout (logged as an error); its remaining tasks go to the other environments.
    - ``reset_backoff_s``: wait after a failed reset before the environment's next one, doubling
      with each consecutive failure (a device that is restarting gets time to come back).
    """

    env: SimDroidEnvConfig = field(default_factory=lambda: SimDroidEnvConfig(screenshots=False, ui_xml=False))
    parallel_envs: int = 8
    greedy: bool = False
    seed: int = 0
    run_id: str = "local"
    pool: str = "sim"
    collector_id: str = "c0"
    policy_name: str = "distrl-policy"
    policy_version: int = 0
    max_reset_failures: int = 3
    reset_backoff_s: float = 0.5

    def __post_init__(self) -> None:
        if self.parallel_envs < 1:
            raise ValueError(f"RolloutConfig.parallel_envs must be >= 1, got {self.parallel_envs}")
        if self.max_reset_failures < 1:
            raise ValueError(f"RolloutConfig.max_reset_failures must be >= 1, got {self.max_reset_failures}")
        if not 0.0 <= self.reset_backoff_s <= 60.0:
            raise ValueError(
                f"RolloutConfig.reset_backoff_s must be in [0, 60] seconds, got {self.reset_backoff_s}"
            )


@dataclass(frozen=True)
class EpisodeSummary:
    """``status``: "ok", or "env_error" when the environment failed (``error`` says how); the
    rows of a failed episode carry that status, so the learner's replay skips them."""

    episode_id: str
    task_id: str
    success: bool
    steps: int
    reward: float
    status: str = "ok"
    error: str | None = None


@dataclass
class RolloutResult:
    """``rows``: step rows, plus one ``env_error`` row (step 0, no action) for each episode that
    failed before its first step (reset or first step), so every attempted episode reaches the store. ``dropped_envs``: devices
    taken out after ``max_reset_failures`` failed resets in a row; ``unattempted``: tasks left over
    when no environment remained. ``abandoned``: episodes cut off unfinished because ``stop`` said
    so (none of their steps is in ``rows``); tasks not yet started then are not counted anywhere."""

    rows: list[dict[str, Any]]
    episodes: list[EpisodeSummary]
    dropped_envs: list[str] = field(default_factory=list)
    unattempted: int = 0
    abandoned: int = 0

    @property
    def success_rate(self) -> float:
        return sum(e.success for e in self.episodes) / max(len(self.episodes), 1)

    @property
    def num_steps(self) -> int:
        return sum(e.steps for e in self.episodes)


def step_row(
    config: RolloutConfig,
    *,
    episode_id: str,
    task: Task,
    observation: Observation,
    output: ActOutput,
    reward: float,
    done: bool,
    invalid: bool,
    started_at: datetime,
    latency_s: float,
    device_id: str,
    env_kind: EnvKind = "sim",
) -> dict[str, Any]:
    """One schema row; ``episode_success``/``episode_status`` are filled when the episode ends."""
    return {
        "run_id": config.run_id,
        "episode_id": episode_id,
        "step": observation.step,
        "pool": config.pool,
        "collector_id": config.collector_id,
        "device_id": device_id,
        "env_kind": env_kind,
        "task_id": task.task_id,
        "task_family": task.family,
        "instruction": observation.instruction,
        "observation_text": observation.ui_text,
        "observation": observation_kind(observation),
        "screenshot_png": observation.screenshot_png,
        "raw_output": utf8_safe(output.raw_text),  # Arrow strings are UTF-8: no lone surrogates
        "action": format_action(output.action),
        "action_valid": output.action.is_valid and not invalid,
        "reward": float(reward),
        "done": bool(done),
        "episode_success": False,
        "episode_status": "ok",
        "behaviour_logprob": float(output.logprob),
        "action_token_count": int(output.token_count),
        "policy_name": config.policy_name,
        "policy_version": int(config.policy_version),
        "step_started_at": started_at,
        "step_latency_ms": float(latency_s * 1000.0),
    }


ActFn = Callable[[list[Any], list[Observation]], list[ActOutput]]


def _device_id(env: Environment) -> str:
    return str(env.serial or "unknown")


def _outage_row(
    config: RolloutConfig, episode_id: str, task: Task, env: Environment, error: str
) -> dict[str, Any]:
    """The one row of an episode whose reset failed: it took no step, but it was attempted."""
    empty = Observation(task.instruction, 0, (), (), "", "", None, (0, 0))
    output = ActOutput("", Action.invalid("", error), 0.0, 0, 0.0, 0.0)
    row = step_row(
        config,
        episode_id=episode_id,
        task=task,
        observation=empty,
        output=output,
        reward=0.0,
        done=True,
        invalid=True,
        started_at=datetime.now(UTC),
        latency_s=0.0,
        device_id=_device_id(env),
        env_kind=env.kind,
    )
    row["episode_status"] = "env_error"
    return row


@dataclass
class _Episode:
    episode_id: str
    task: Task
    observation: Observation | None  # None only for an episode whose reset failed
    rows: list[dict[str, Any]] = field(default_factory=list)


class _Rollout:
    """The state of one ``run_episodes`` call: which environment runs which episode, what is done."""

    def __init__(
        self,
        config: RolloutConfig,
        envs: list[Environment],
        pending: Iterator[tuple[Task, int | None]],
    ) -> None:
        self.config, self.envs, self.pending = config, envs, pending
        self.rng = random.Random(config.seed)
        self.rows: list[dict[str, Any]] = []
        self.episodes: list[EpisodeSummary] = []
        self.active: dict[int, _Episode] = {}
        self.failed_resets = [0] * len(envs)
        self.dropped: list[str] = []
        self.attempted = 0

    def finish(self, slot: int, episode: _Episode, success: bool, error: str | None = None) -> None:
        status = "ok" if error is None else "env_error"
        steps = len(episode.rows)
        if error is not None and not episode.rows:  # failed before its first step: still recorded
            env = self.envs[slot]
            episode.rows.append(_outage_row(self.config, episode.episode_id, episode.task, env, error))
        for row in episode.rows:
            row["episode_success"] = success
            row["episode_status"] = status
        if episode.rows:
            episode.rows[-1]["done"] = True
        self.rows.extend(episode.rows)
        reward = sum(r["reward"] for r in episode.rows)
        self.episodes.append(
            EpisodeSummary(episode.episode_id, episode.task.task_id, success, steps, reward, status, error)
        )
        self.active.pop(slot, None)

    def start(self, slot: int) -> None:
        """Reset the slot's environment to the next pending task (skipping tasks whose reset fails)."""
        for task, reset_seed in self.pending:
            self.attempted += 1
            # Seeded for reproducibility, but namespaced by the run: a re-run of a deployment with the
            # same seed must not produce ids the replay would drop as duplicates.
            episode_id = uuid.uuid5(
                uuid.NAMESPACE_OID, f"{self.config.run_id}/{self.rng.getrandbits(128):032x}"
            ).hex
            seed = self.rng.getrandbits(31)  # drawn even when given, so the episode ids stay the same
            try:
                observation = self.envs[slot].reset(task, seed=seed if reset_seed is None else reset_seed)
            except Exception as exc:  # a device that cannot reset: record the attempt, back off
                if self._reset_failed(slot, _Episode(episode_id, task, None), exc):
                    return
                continue
            self.failed_resets[slot] = 0
            self.active[slot] = _Episode(episode_id, task, observation)
            return

    def _reset_failed(self, slot: int, episode: _Episode, exc: Exception) -> bool:
        """Record a failed reset; True when the environment is taken out of the rollout."""
        env = self.envs[slot]
        error = f"reset: {type(exc).__name__}: {exc}"
        log.warning("reset of %s for %s failed: %s", _device_id(env), episode.task.task_id, exc)
        self.finish(slot, episode, False, error)
        self.failed_resets[slot] += 1
        if self.failed_resets[slot] >= self.config.max_reset_failures:
            self.dropped.append(_device_id(env))
            log.error(
                "taking %s out of this rollout: %d resets in a row failed (last: %s); "
                "its remaining tasks go to the other environments",
                _device_id(env),
                self.failed_resets[slot],
                error,
            )
            return True
        time.sleep(self.config.reset_backoff_s * 2 ** (self.failed_resets[slot] - 1))
        return False

    def step_all(self, act: ActFn) -> None:
        """One action for every active episode (one call of the actor), then one step of each."""
        slots = sorted(self.active)
        started_at, started = datetime.now(UTC), time.perf_counter()
        outputs = act([self.envs[s] for s in slots], [self._observation(s) for s in slots])
        act_latency = (time.perf_counter() - started) / len(slots)
        for slot, output in zip(slots, outputs, strict=True):
            self._step(slot, output, started_at, act_latency)

    def _observation(self, slot: int) -> Observation:
        observation = self.active[slot].observation
        assert observation is not None  # active episodes were reset
        return observation

    def _step(self, slot: int, output: ActOutput, started_at: datetime, act_latency: float) -> None:
        episode, env = self.active[slot], self.envs[slot]
        observation = self._observation(slot)
        # Stored as executed: under the screen observation an element tap is its box centre's point.
        output = dataclasses.replace(output, action=as_executed(output.action, observation))
        try:
            result = env.step(output.action)
        except Exception as exc:
            log.warning("step on %s failed: %s", _device_id(env), exc)
            self.finish(slot, episode, False, f"step: {type(exc).__name__}: {exc}")
            self.start(slot)
            return
        episode.rows.append(
            step_row(
                self.config,
                episode_id=episode.episode_id,
                task=episode.task,
                observation=observation,
                output=output,
                reward=result.reward,
                done=result.done,
                invalid=result.info.invalid,
                started_at=started_at,
                latency_s=act_latency + result.info.latency_s,
                device_id=_device_id(env),
                env_kind=env.kind,
            )
        )
        episode.observation = result.observation
        if result.done:
            self.finish(slot, episode, result.info.success)
            self.start(slot)


def _as_act_fn(actor: Actor | ActFn, greedy: bool) -> ActFn:
    if isinstance(actor, Actor):
        policy = actor
        return lambda _envs, observations: policy.act(observations, greedy=greedy)
    return actor


def run_episodes(
    actor: Actor | ActFn,
    tasks: Sequence[Task | str],
    config: RolloutConfig | None = None,
    *,
    envs: Sequence[Environment] | None = None,
    reset_seeds: Sequence[int] | None = None,
    stop: Callable[[], bool] | None = None,
) -> RolloutResult:
    """One episode per task (tasks may repeat). ``actor`` is a policy (``act(observations)``) or a
    function ``(envs, observations) -> outputs`` (e.g. the scripted expert, which reads the device).

    ``envs``: environments to use (SimDroidEnv or AdbEnv, kept by the caller across calls, e.g. a
    collector's emulators); by default ``config.parallel_envs`` fresh SimDroid environments. An
    environment that raises during reset or step ends that episode with status "env_error" and
    the rollout goes on with the next task; the actor's own errors propagate. ``reset_seeds``: one
    environment seed per task (e.g. the same for a group of episodes that must start alike); by
    default each episode's seed is drawn from ``config.seed``. ``stop``: asked before every step;
    when it answers True the rollout returns at once with the episodes finished so far, and the
    unfinished ones are dropped whole (a partial episode would teach the learner a false ending).

    Example::

        result = run_episodes(policy, ["general-train-0000"] * 4, RolloutConfig(parallel_envs=2))
        result.success_rate, steps_to_table(result.rows)  # steps_to_table: storage.schema
    """
    config = config or RolloutConfig()
    queue = [get_task(t) if isinstance(t, str) else t for t in tasks]
    if envs is None:
        count = min(config.parallel_envs, max(len(queue), 1))
        envs = make_sim_envs(config.env, count, serial_prefix=f"sim-{config.collector_id}")
    if reset_seeds is not None and len(reset_seeds) != len(queue):
        raise ValueError(
            f"reset_seeds has {len(reset_seeds)} entries for {len(queue)} tasks; pass one per task"
        )
    seeds: Sequence[int | None] = reset_seeds if reset_seeds is not None else [None] * len(queue)
    rollout = _Rollout(config, list(envs), iter(zip(queue, seeds, strict=True)))
    act = _as_act_fn(actor, config.greedy)
    for slot in range(len(rollout.envs)):
        rollout.start(slot)
    while rollout.active:
        if stop is not None and stop():
            log.info("stopping mid-rollout: %d unfinished episodes dropped", len(rollout.active))
            return RolloutResult(rollout.rows, rollout.episodes, rollout.dropped, 0, len(rollout.active))
        rollout.step_all(act)
    unattempted = len(queue) - rollout.attempted
    if unattempted:
        log.error(
            "no environment left in this rollout (%s taken out): %d tasks not run",
            rollout.dropped,
            unattempted,
        )
    return RolloutResult(rollout.rows, rollout.episodes, rollout.dropped, unattempted)


def expert_actor(noise: float, seed: int) -> ActFn:
    """The noisy scripted expert as an actor (log-probs are unknown: recorded as 0)."""
    from simulators.simdroid.expert import expert_action

    rng = random.Random(seed)

    def act(envs: list[Any], observations: list[Observation]) -> list[ActOutput]:
        outputs = []
        for env in envs:
            assert env.task is not None
            action: Action = expert_action(env, env.task, noise=noise, rng=rng if noise > 0 else None)
            outputs.append(ActOutput(format_action(action), action, 0.0, 0, 0.0, 0.0))
        return outputs

    return act
