"""The environment protocol that ``SimDroidEnv`` and ``AdbEnv`` implement, its typed step result,
and the episode rules (DigiRL's) both apply through one piece of bookkeeping.

Rules: the reward is the task's success (1/0) at the episode's last step; the episode ends on
success (when the environment can tell success), on ``status(...)``, or at the horizon (then it is
*truncated*); an invalid action does nothing and adds ``invalid_action_penalty`` (<= 0) to the step's
reward.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Protocol

from distrl_core.envs.actions import Action, ActionKind, format_action
from distrl_core.envs.kinds import EnvKind
from distrl_core.envs.observation import Observation

__all__ = [
    "FAMILIES",
    "SPLITS",
    "Environment",
    "EpisodeRules",
    "EpisodicEnv",
    "StepInfo",
    "StepOutcome",
    "StepResult",
    "Task",
]


FAMILIES = ("general", "webshop")
SPLITS = ("train", "test")


@dataclass(frozen=True)
class Task:
    task_id: str
    family: str  # "general" | "webshop"
    kind: str  # open_app, toggle_setting, set_alarm, web_search, set_brightness, shop_*
    instruction: str
    split: str  # "train" | "test"
    horizon: int
    params: Mapping[str, Any]  # JSON-able; "template" names the phrasing, "setup" the start state

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"Task.family must be one of {FAMILIES}, got {self.family!r}")
        if self.split not in SPLITS:
            raise ValueError(f"Task.split must be one of {SPLITS}, got {self.split!r}")
        if self.horizon < 1:
            raise ValueError(f"Task.horizon must be >= 1, got {self.horizon}")
        # read-only, so that a task shared by environments cannot be changed under them
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    def __hash__(self) -> int:
        return hash(self.task_id)

    def __reduce__(self) -> tuple[type[Task], tuple[Any, ...]]:
        # mappingproxy cannot be pickled; rebuild from a plain dict (multiprocessing, deepcopy)
        fields = (self.task_id, self.family, self.kind, self.instruction, self.split, self.horizon)
        return (Task, (*fields, dict(self.params)))


@dataclass(frozen=True)
class StepInfo:
    """What one step reports besides observation, reward and done.

    ``success_known`` is False where the environment has no way to check success (an ADB device
    without a ``success_check``). ``latency_s`` is wall-clock, ``virtual_latency_s`` the simulated
    device time (0 on a real device). ``offline_waits``: outages waited out (SimDroid: during the
    environment's life; ADB: reconnects during this step). ``action_lost``: the transport dropped
    while the action ran, so it may not have happened; ``action_error``: a command of the action
    failed (its output, shortened).
    """

    success: bool
    invalid: bool
    invalid_reason: str | None
    action: str
    task_id: str
    step: int
    truncated: bool
    latency_s: float
    virtual_latency_s: float = 0.0
    offline_waits: int = 0
    success_known: bool = True
    serial: str | None = None
    action_lost: bool = False
    action_error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The info as a plain dict (what gymnasium's ``step`` returns)."""
        return dataclasses.asdict(self)


@dataclass
class StepResult:
    observation: Observation
    reward: float
    done: bool
    info: StepInfo
    truncated: bool = False  # ended by the horizon rather than by success or a status action


class Environment(Protocol):
    """One device, one episode at a time: ``reset`` to a task, ``step`` until ``done``, ``close``.

    Example::

        env = make_env(SimDroidEnvConfig(screenshots=False))  # or make_env(AdbEnvConfig(serial=...))
        observation = env.reset("general-train-0000", seed=0)
        result = env.step("key(HOME)")  # an Action or its text
        while not result.done:
            result = env.step(choose(result.observation))
        print(result.reward, result.info.success, result.info.latency_s)
        env.close()
    """

    kind: ClassVar[EnvKind]  # as the trajectory rows record it
    task: Task | None
    history: list[str]
    done: bool

    @property
    def serial(self) -> str | None: ...

    def reset(self, task: Task | str, seed: int | None = None) -> Observation: ...

    def step(self, action: Action | str) -> StepResult: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class EpisodeRules:
    """The episode rules of one step: SimDroid takes them from its config and the task's horizon,
    ADB from ``max_steps`` (or the task's horizon) and always ends on success and on status."""

    horizon: int
    invalid_action_penalty: float = 0.0
    end_on_success: bool = True
    end_on_status: bool = True


@dataclass(frozen=True)
class StepOutcome:
    """Reward and termination of a step under the episode rules, before the environment adds what
    it measured (latency, outages, device facts) to make the step's ``StepInfo``."""

    reward: float
    done: bool
    truncated: bool
    success: bool
    invalid_reason: str | None
    action: str
    task_id: str
    step: int

    def info(self, latency_s: float, **measured: Any) -> StepInfo:
        return StepInfo(
            success=self.success,
            invalid=self.invalid_reason is not None,
            invalid_reason=self.invalid_reason,
            action=self.action,
            task_id=self.task_id,
            step=self.step,
            truncated=self.truncated,
            latency_s=latency_s,
            **measured,
        )


class EpisodicEnv:
    """The episode bookkeeping ``SimDroidEnv`` and ``AdbEnv`` share: the task, the step count, the
    actions taken so far (their text), whether the episode is over, and the reward/termination rule."""

    def __init__(self) -> None:
        self.task: Task | None = None
        self.step_count = 0
        self.history: list[str] = []
        self.done = True

    def _begin(self, task: Task) -> None:
        self.task = task
        self.step_count = 0
        self.history = []
        self.done = False

    def _running_task(self) -> Task:
        if self.done or self.task is None:
            raise RuntimeError("the episode is over (or never started): call reset() first")
        return self.task

    def _record(
        self, action: Action, *, success: bool, invalid_reason: str | None, rules: EpisodeRules
    ) -> StepOutcome:
        """Count the step, remember the action, and apply the rules."""
        task = self._running_task()
        self.step_count += 1
        self.history.append(format_action(action))
        is_status = action.kind is ActionKind.STATUS
        terminated = (success and rules.end_on_success) or (is_status and rules.end_on_status)
        truncated = not terminated and self.step_count >= rules.horizon
        self.done = terminated or truncated
        reward = (1.0 if success else 0.0) if self.done else 0.0
        if invalid_reason is not None:
            reward += rules.invalid_action_penalty
        return StepOutcome(
            reward,
            self.done,
            truncated,
            success,
            invalid_reason,
            self.history[-1],
            task.task_id,
            self.step_count,
        )

    def close(self) -> None:
        """End the episode; the environment can be reset again."""
        self.done = True
