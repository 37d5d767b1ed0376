"""Run an actor in SimDroid and return step rows in the trajectory schema (plus per-episode facts).

Several environments step in lock-step so that the policy acts on a batch of observations per
call. Rows are plain dicts with exactly the columns of ``storage.schema.STEP_SCHEMA`` (this module
cannot import storage; ``tests/learner`` checks the two agree), ready for
``storage.schema.steps_to_table`` or a ``ShardWriter``.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from distrl_core.envs.actions import Action, format_action
from distrl_core.envs.observation import Observation
from distrl_core.envs.sim_env import SimDroidEnv, SimDroidEnvConfig
from distrl_core.envs.simdroid.tasks import Task, get_task
from distrl_core.policy.types import ActOutput

log = logging.getLogger(__name__)

__all__ = ["Actor", "EpisodeSummary", "RolloutConfig", "RolloutResult", "run_episodes", "step_row"]


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
    - ``max_reset_failures``: consecutive failed resets after which an environment is dropped.
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

    def __post_init__(self) -> None:
        if self.parallel_envs < 1:
            raise ValueError(f"RolloutConfig.parallel_envs must be >= 1, got {self.parallel_envs}")


@dataclass(frozen=True)
class EpisodeSummary:
    episode_id: str
    task_id: str
    success: bool
    steps: int
    reward: float
    status: str = "ok"  # "ok", or "env_error" when the environment failed mid-episode


@dataclass
class RolloutResult:
    rows: list[dict[str, Any]]
    episodes: list[EpisodeSummary]

    @property
    def success_rate(self) -> float:
        return sum(e.success for e in self.episodes) / max(len(self.episodes), 1)

    @property
    def num_steps(self) -> int:
        return len(self.rows)


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
) -> dict[str, Any]:
    """One schema row; ``episode_success``/``episode_status`` are filled when the episode ends."""
    return {
        "run_id": config.run_id,
        "episode_id": episode_id,
        "step": observation.step,
        "pool": config.pool,
        "collector_id": config.collector_id,
        "device_id": device_id,
        "env_kind": "sim",
        "task_id": task.task_id,
        "task_family": task.family,
        "instruction": observation.instruction,
        "observation_text": observation.ui_text,
        "screenshot_png": observation.screenshot_png,
        "raw_output": output.raw_text,
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


ActFn = Callable[[list[SimDroidEnv], list[Observation]], list[ActOutput]]


def run_episodes(
    actor: Actor | ActFn,
    tasks: Sequence[Task | str],
    config: RolloutConfig | None = None,
    envs: Sequence[Any] | None = None,
) -> RolloutResult:
    """One episode per task (tasks may repeat). ``actor`` is a policy (``act(observations)``) or a
    function ``(envs, observations) -> outputs`` (e.g. the scripted expert, which reads the device).

    ``envs``: environments to use (anything with SimDroidEnv's ``reset``/``step``, e.g. ``AdbEnv``);
    by default ``parallel_envs`` new SimDroid environments. An environment that raises mid-episode
    ends that episode as ``env_error`` (its rows are kept, marked, never trained on) and is reset
    for the next task; one whose reset fails ``max_reset_failures`` times in a row is dropped.
    """
    config = config or RolloutConfig()
    queue = [get_task(t) if isinstance(t, str) else t for t in tasks]
    rng = random.Random(config.seed)
    if envs is None:
        envs = [
            SimDroidEnv(config.env, device=None) for _ in range(min(config.parallel_envs, max(len(queue), 1)))
        ]
        for i, env in enumerate(envs):
            env.device.serial = f"sim-{config.collector_id}-{i}"
    envs = list(envs)
    act: ActFn
    if hasattr(actor, "act"):
        act = lambda _envs, observations: actor.act(observations, greedy=config.greedy)  # noqa: E731
    else:
        act = actor  # type: ignore[assignment]

    rows: list[dict[str, Any]] = []
    episodes: list[EpisodeSummary] = []
    active: dict[int, tuple[str, Task, Observation, list[dict[str, Any]]]] = {}
    reset_failures = [0] * len(envs)
    next_task = 0

    def start(slot: int) -> None:
        nonlocal next_task
        while next_task < len(queue) and reset_failures[slot] < config.max_reset_failures:
            task = queue[next_task]
            next_task += 1
            episode_id = uuid.UUID(int=rng.getrandbits(128)).hex
            try:
                observation = envs[slot].reset(task, seed=rng.getrandbits(31))
            except Exception as exc:  # a failed reset loses no data: the task is skipped
                reset_failures[slot] += 1
                log.warning(
                    "reset of %s failed (%s); skipping task %s", _device_id(envs[slot]), exc, task.task_id
                )
                continue
            reset_failures[slot] = 0
            active[slot] = (episode_id, task, observation, [])
            return

    def finish(slot: int, episode_rows: list[dict[str, Any]], success: bool, status: str) -> None:
        episode_id, task = active[slot][0], active[slot][1]
        for row in episode_rows:
            row["episode_success"] = success
            row["episode_status"] = status
        rows.extend(episode_rows)
        reward = sum(r["reward"] for r in episode_rows)
        episodes.append(EpisodeSummary(episode_id, task.task_id, success, len(episode_rows), reward, status))
        del active[slot]
        start(slot)

    for slot in range(len(envs)):
        start(slot)
    while active:
        slots = sorted(active)
        started_at, started = datetime.now(UTC), time.perf_counter()
        outputs = act([envs[s] for s in slots], [active[s][2] for s in slots])
        act_latency = (time.perf_counter() - started) / len(slots)
        for slot, output in zip(slots, outputs, strict=True):
            episode_id, task, observation, episode_rows = active[slot]
            row_args = {"episode_id": episode_id, "task": task, "observation": observation, "output": output}
            try:
                result = envs[slot].step(output.action)
            except Exception as exc:  # the environment broke: keep the episode, marked, not as data
                log.warning(
                    "%s failed mid-episode (%s); episode %s marked env_error",
                    _device_id(envs[slot]),
                    exc,
                    episode_id,
                )
                episode_rows.append(
                    step_row(
                        config,
                        **row_args,
                        reward=0.0,
                        done=True,
                        invalid=False,
                        started_at=started_at,
                        latency_s=time.perf_counter() - started,
                        device_id=_device_id(envs[slot]),
                    )
                )
                finish(slot, episode_rows, False, "env_error")
                continue
            episode_rows.append(
                step_row(
                    config,
                    **row_args,
                    reward=result.reward,
                    done=result.done,
                    invalid=bool(result.info["invalid"]),
                    started_at=started_at,
                    latency_s=act_latency + float(result.info["latency_s"]),
                    device_id=_device_id(envs[slot]),
                )
            )
            if result.done:
                finish(slot, episode_rows, bool(result.info["success"]), "ok")
            else:
                active[slot] = (episode_id, task, result.observation, episode_rows)
    return RolloutResult(rows, episodes)


def _device_id(env: Any) -> str:
    serial = getattr(env, "serial", None)
    if isinstance(serial, str) and serial:
        return serial
    return str(env.device.serial)


def expert_actor(noise: float, seed: int) -> ActFn:
    """The noisy scripted expert as an actor (log-probs are unknown: recorded as 0)."""
    from distrl_core.envs.simdroid.expert import expert_action

    rng = random.Random(seed)

    def act(envs: list[SimDroidEnv], observations: list[Observation]) -> list[ActOutput]:
        outputs = []
        for env in envs:
            assert env.task is not None
            action: Action = expert_action(env, env.task, noise=noise, rng=rng if noise > 0 else None)
            outputs.append(ActOutput(format_action(action), action, 0.0, 0, 0.0, 0.0))
        return outputs

    return act
