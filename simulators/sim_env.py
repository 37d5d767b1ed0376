"""SimDroidEnv: the RL environment over a SimDroid device, speaking canonical Actions.

Episodes follow DigiRL: the reward is the task's success (1/0) at the last step, the episode ends
when the task succeeds (DigiRL stops as soon as its evaluator says success), when the agent emits
``status(...)``, or at the task's horizon (10 General, 20 Web Shopping). Invalid actions (unparseable
text, an element index that is not on screen, an unknown app) do nothing on the device and cost
``invalid_action_penalty``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, TypeVar

import numpy as np

from distrl_core.envs.actions import Action, ActionKind, parse_action, swipe_endpoints, to_pixels
from distrl_core.envs.kinds import EnvKind
from distrl_core.envs.observation import Observation, UIElement, compact_tree, elements_to_xml
from distrl_core.envs.protocol import FAMILIES, EpisodeRules, EpisodicEnv, StepResult, Task
from distrl_core.envs.screen import OBSERVATION_KINDS, ObservationKind
from simulators.screen_frames import PixelFrame, is_blank
from simulators.simdroid.catalog import find_app
from simulators.simdroid.device import DeviceOffline, ResetFailed, SimDroid, SimDroidConfig
from simulators.simdroid.render import solid_png
from simulators.simdroid.tasks import SPLIT_CHOICES, get_task, load_tasks

__all__ = ["SimDroidEnv", "SimDroidEnvConfig", "StepResult"]

_PNG_END = b"IEND\xaeB`\x82"
_T = TypeVar("_T")


@dataclass
class SimDroidEnvConfig:
    """Environment settings.

    - ``device``: the SimDroid device (size, screenshot scale, distractors, faults). The env's
      default turns distractor dialogs on at 10%, like the pop-ups of real apps.
    - ``family``/``split``: the task pool ``reset()`` samples from when given no task (``split``:
      "train", "test" or a selection carved from train, e.g. "fit_words": ``load_tasks``).
    - ``seed``: seeds task sampling.
    - ``screenshots``: render a PNG per step (off: text-only and several times faster).
    - ``ui_xml``: include the uiautomator XML in observations.
    - ``invalid_action_penalty``: reward added for an invalid action; DigiRL has none, so 0.0.
    - ``end_on_success``: end the episode as soon as the task succeeds (DigiRL's evaluator rule).
    - ``end_on_status``: end the episode when the agent emits status(complete|impossible).
    - ``reset_retries``: retries of a reset that the fault model failed before giving up.
    - ``wait_offline``: when the device is offline, wait for it (up to ``offline_timeout_s``) and
      retry the call instead of raising DeviceOffline.
    - ``screenshot_retries``: re-captures of a corrupt (truncated/blank) screenshot; if all fail,
      the last frame is returned with ``observation.extras["screenshot_ok"] = False``.
    - ``serial``: the device's serial (what rollout rows record as ``device_id``).
    - ``observation``: "tree" builds the policy's elements from the UI dump; "screen" from an OCR
      of the screenshot alone (``make_env`` wraps the env in ``simulators.screen_env.ScreenEnv``,
      drawing screenshots readable: ``SimDroidConfig.readable`` unless ``device.font`` is set). With
      ``screenshots`` off no PNG is encoded: the OCR reads the drawn pixels (``screen_pixels``).
    """

    device: SimDroidConfig = field(default_factory=lambda: SimDroidConfig(distractor_prob=0.1))
    family: str | None = None
    split: str = "train"
    seed: int = 0
    screenshots: bool = True
    ui_xml: bool = True
    invalid_action_penalty: float = 0.0
    end_on_success: bool = True
    end_on_status: bool = True
    reset_retries: int = 3
    wait_offline: bool = True
    offline_timeout_s: float = 30.0
    screenshot_retries: int = 5
    serial: str = "emulator-5554"
    observation: ObservationKind = "tree"

    def __post_init__(self) -> None:
        if self.observation not in OBSERVATION_KINDS:
            raise ValueError(
                f"SimDroidEnvConfig.observation must be one of {OBSERVATION_KINDS}, got {self.observation!r}"
            )
        if self.family is not None and self.family not in FAMILIES:
            raise ValueError(
                f"SimDroidEnvConfig.family must be None or one of {FAMILIES}, got {self.family!r}"
            )
        if self.split not in SPLIT_CHOICES:
            raise ValueError(f"SimDroidEnvConfig.split must be one of {SPLIT_CHOICES}, got {self.split!r}")
        if self.invalid_action_penalty > 0:
            raise ValueError("SimDroidEnvConfig.invalid_action_penalty is a penalty: use a value <= 0")
        if self.reset_retries < 0 or self.screenshot_retries < 0 or self.offline_timeout_s < 0:
            raise ValueError("SimDroidEnvConfig retries and offline_timeout_s must be >= 0")


class SimDroidEnv(EpisodicEnv):
    """The ``Environment`` over a SimDroid.

    Example::

        env = SimDroidEnv(SimDroidEnvConfig(family="general", screenshots=False, serial="sim-c0-0"))
        observation = env.reset()  # a task sampled from the pool; or reset("general-train-0000")
        result = env.step(expert_action(env, env.task))
        result.info.success, result.info.virtual_latency_s
    """

    kind: ClassVar[EnvKind] = "sim"

    def __init__(self, config: SimDroidEnvConfig | None = None, device: SimDroid | None = None) -> None:
        super().__init__()
        self.config = config or SimDroidEnvConfig()
        self.device = device or SimDroid(self.config.device, serial=self.config.serial)
        self._rng = random.Random(self.config.seed)
        self._pool = load_tasks(self.config.family, self.config.split)
        self.offline_waits = 0

    @property
    def serial(self) -> str:
        return self.device.serial

    # -- plumbing ----------------------------------------------------------------------------
    def _call(self, fn: Callable[..., _T], *args: object) -> _T:
        """Run a device call, waiting out an outage when configured to."""
        deadline = time.monotonic() + self.config.offline_timeout_s
        while True:
            try:
                return fn(*args)
            except DeviceOffline:
                if not self.config.wait_offline or time.monotonic() >= deadline:
                    raise
                self.offline_waits += 1
                time.sleep(min(max(self.device.faults.offline_remaining_s(), 0.001), 0.5))

    def _screenshot(self) -> tuple[bytes, bool]:
        """A screenshot and whether it looks sound (complete PNG, not a blank frame)."""
        scale = self.device.config.screenshot_scale
        size = (max(1, int(self.device.size[0] * scale)), max(1, int(self.device.size[1] * scale)))
        blanks = (solid_png(size, (255, 255, 255)), solid_png(size, (0, 0, 0)))
        png = b""
        for _ in range(self.config.screenshot_retries + 1):
            png = self._call(self.device.screenshot_png)
            if png.endswith(_PNG_END) and png not in blanks:
                return png, True
        return png, False

    def screen_pixels(self) -> PixelFrame:
        """The current screenshot as pixels, never a PNG: what the screen observation reads when
        the shards keep no screenshot (``ScreenEnv``; the env's ``screenshots`` is then off). A
        sound frame comes with the device's ``screen_key`` and undrawn (drawn only if the OCR has
        not read that screen before). A capture that fails (the fault model's truncated frame, which
        has no pixel form) or comes back blank is retried as ``_screenshot`` retries; when every one
        fails the frame is all black, which reads as no text, with ``ok`` False."""
        device = self.device
        for _ in range(self.config.screenshot_retries + 1):
            shot = self._call(device.screenshot_pixels, True)
            if callable(shot) or (shot is not None and not is_blank(shot)):
                return PixelFrame(shot, device.screen_key(), True)
        width, height = device.shot_size
        return PixelFrame(np.zeros((height, width, 3), np.uint8), None, False)

    def _observe(self) -> Observation:
        assert self.task is not None
        elements = tuple(self._call(self.device.elements))
        screenshot, screenshot_ok = self._screenshot() if self.config.screenshots else (None, True)
        return Observation(
            instruction=self.task.instruction,
            step=self.step_count,
            previous_actions=tuple(self.history),
            elements=elements,
            ui_text=compact_tree(elements),
            ui_xml=elements_to_xml(elements, self.device.size) if self.config.ui_xml else "",
            screenshot_png=screenshot,
            screen_size=self.device.size,
            activity=self._call(self.device.current_activity),
            extras={"task_id": self.task.task_id, "family": self.task.family, "screenshot_ok": screenshot_ok},
        )

    # -- API ---------------------------------------------------------------------------------
    def reset(self, task: Task | str | None = None, seed: int | None = None) -> Observation:
        """Start an episode on ``task`` (a Task, a task id, or None to sample from the pool)."""
        self.device.faults.new_episode()
        if seed is not None:
            self._rng.seed(seed)
        if task is None:
            task = self._rng.choice(self._pool)
        elif isinstance(task, str):
            task = get_task(task)
        for attempt in range(self.config.reset_retries + 1):
            try:
                self._call(self.device.load_task, task, seed)
                break
            except ResetFailed:
                if attempt == self.config.reset_retries:
                    raise
        self._begin(task)
        return self._observe()

    def _execute(self, action: Action, elements: list[UIElement]) -> str | None:
        """Perform a valid action on the device; returns why it could not be performed, if so."""
        device = self.device
        kind = action.kind
        if kind in (ActionKind.TAP, ActionKind.LONG_PRESS):
            if action.index is not None:
                if action.index >= len(elements):
                    return f"element index {action.index} is not on screen ({len(elements)} elements)"
                x, y = elements[action.index].center
            else:
                assert action.point is not None  # a valid tap without an index has a point
                x, y = to_pixels(action.point, device.size)
            self._call(device.tap if kind is ActionKind.TAP else device.long_press, x, y)
        elif kind is ActionKind.SWIPE:
            start, end = swipe_endpoints(action)
            self._call(device.swipe, *to_pixels(start, device.size), *to_pixels(end, device.size))
        elif kind is ActionKind.TYPE:
            self._call(device.input_text, action.text)
        elif kind is ActionKind.KEY:
            self._call(device.keyevent, action.keycode)
        elif kind is ActionKind.OPEN_APP:
            app = find_app(action.text or "")
            if app is None:
                return f"no installed app named {action.text!r}"
            self._call(device.start_app, app.package)
        return None

    def step(self, action: Action | str) -> StepResult:
        task = self._running_task()
        if isinstance(action, str):
            action = parse_action(action)
        started, virtual_before = time.perf_counter(), self.device.virtual_time_s
        invalid_reason = action.reason if not action.is_valid else None
        if action.is_valid:
            elements = self._call(self.device.elements) if action.index is not None else []
            invalid_reason = self._execute(action, elements)
        rules = EpisodeRules(
            task.horizon,
            self.config.invalid_action_penalty,
            self.config.end_on_success,
            self.config.end_on_status,
        )
        outcome = self._record(
            action, success=self.device.is_successful(task), invalid_reason=invalid_reason, rules=rules
        )
        observation = self._observe()  # part of the step's latency, as on a real device
        info = outcome.info(
            time.perf_counter() - started,
            virtual_latency_s=self.device.virtual_time_s - virtual_before,
            offline_waits=self.offline_waits,
            serial=self.serial,
        )
        return StepResult(observation, outcome.reward, outcome.done, info, outcome.truncated)
