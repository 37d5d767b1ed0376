"""AdbEnv: the RL environment over a real (or fake) Android device reached through an adb server.

The same ``Environment`` as ``SimDroidEnv`` (``distrl_core.envs.protocol``), with the same episode
rules (DigiRL's): reward 1/0 for success at the last step, the episode ends on success (when a
``success_check`` is configured), on ``status(...)``, or at the horizon; an invalid action
(unparseable, element index not on screen, unknown app) does nothing and costs
``invalid_action_penalty``. Observations come from ``uiautomator dump`` and ``screencap -p``.

Example::

    env = AdbEnv(AdbEnvConfig(serial="emulator-5554", success_check=adb_rule_success_check))
    observation = env.reset("general-train-0000")
    result = env.step("key(HOME)")
    result.info.success, result.info.serial, result.info.action_lost
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

from adbutils.errors import AdbError

from distrl_core.envs.actions import Action, ActionKind, parse_action
from distrl_core.envs.kinds import EnvKind
from distrl_core.envs.observation import Observation, UIElement, compact_tree
from distrl_core.envs.protocol import EpisodeRules, EpisodicEnv, StepResult
from simulators.adb.commands import UnexecutableAction, action_to_commands
from simulators.adb.config import AdbEnvConfig
from simulators.adb.console import EmulatorConsole, console_port_for_serial
from simulators.adb.errors import (
    AdbConnectionError,
    AdbEnvError,
    ConsoleError,
    DeviceOfflineError,
    ResetError,
)
from simulators.adb.link import AdbDeviceLink
from simulators.screen_frames import PixelFrame
from simulators.simdroid.tasks import get_task

__all__ = ["AdbEnv", "StepResult", "simdroid_success_check", "simdroid_task_loader"]

DEFAULT_HORIZON = 10


def simdroid_task_loader(link: AdbDeviceLink, task: Any, seed: int | None) -> None:
    """Task loader for the fake ADB server: ``simdroid load-task <id> [seed]`` on the device."""
    command = f"simdroid load-task {task.task_id}" + ("" if seed is None else f" {int(seed)}")
    result = link.shell(command, idempotent=True)
    if result.exit_code != 0:
        raise RuntimeError(result.text.strip() or f"exit code {result.exit_code}")


def simdroid_success_check(link: AdbDeviceLink, task: Any) -> bool:
    """Success check for the fake ADB server: the simulator's own verdict, read over ADB."""
    result = link.shell(f"simdroid is-successful {task.task_id}", idempotent=True)
    return result.exit_code == 0 and result.stdout.strip() == b"true"


@dataclass
class _Screen:
    xml: str
    elements: list[UIElement]
    screenshot: bytes | None
    activity: str


class AdbEnv(EpisodicEnv):
    """One device, one episode at a time. Construct, then ``reset(task)``; errors are AdbEnvError subclasses."""

    kind: ClassVar[EnvKind] = "adb"

    def __init__(self, config: AdbEnvConfig | None = None):
        super().__init__()
        self.config = config or AdbEnvConfig()
        self.link = AdbDeviceLink(self.config)
        self._screen: _Screen | None = None

    @property
    def serial(self) -> str | None:
        return self.link.serial

    # -- observation --------------------------------------------------------------------------------
    def _capture(self) -> _Screen:
        # Screen-only: the OCR reads the screenshot (ScreenEnv); a dump would only cost time.
        xml, elements = self.link.ui_dump() if self.config.observation == "tree" else ("", [])
        screenshot = self.link.screenshot() if self.config.screenshots else None
        return _Screen(xml, elements, screenshot, self.link.current_activity())

    def screen_pixels(self) -> PixelFrame:
        """The screen as pixels from raw ``screencap``, no PNG on either side: what the screen
        observation reads when the shards keep no screenshot (``ScreenEnv``). A phone's frame has no
        key that identifies it, so the OCR hashes its pixels; a frame bad after every retry raises
        ScreenshotError, as ``screencap -p`` does."""
        return PixelFrame(self.link.screenshot_pixels(), None, True)

    def _observation(self, screen: _Screen) -> Observation:
        assert self.task is not None and self.link.screen_size is not None
        elements = tuple(screen.elements)
        return Observation(
            instruction=self.task.instruction,
            step=self.step_count,
            previous_actions=tuple(self.history),
            elements=elements,
            ui_text=compact_tree(elements),
            ui_xml=screen.xml,
            screenshot_png=screen.screenshot,
            screen_size=self.link.screen_size,
            activity=screen.activity,
            extras={
                "task_id": self.task.task_id,
                "family": getattr(self.task, "family", None),
                "serial": self.serial,
            },
        )

    # -- reset --------------------------------------------------------------------------------------
    def reset(self, task: Any | str, seed: int | None = None) -> Observation:
        """Put the device into ``task``'s start state (a task object or a SimDroid task id) and observe."""
        if isinstance(task, str):
            task = get_task(task)
        if self.link.device is None:
            self.link.connect()
        problem = ""
        for attempt in range(self.config.reset_retries + 1):
            if attempt:
                time.sleep(self.config.retry_delay_s)
            self.link.wait_until_online()
            try:
                self._reset_device()
                if self.config.task_loader is not None:
                    self.config.task_loader(self.link, task, seed)
                break
            except (DeviceOfflineError, AdbConnectionError):
                raise  # not a reset problem: the collector must deal with the device or the server
            except (AdbEnvError, AdbError, RuntimeError, OSError) as error:
                problem = f"{type(error).__name__}: {error}"
        else:
            raise ResetError(
                f"could not reset {self.link.where} to task {task.task_id} in {self.config.reset_retries + 1} "
                f"attempts (last: {problem}); check the reset commands / snapshot and restart the device",
                self.serial,
            )
        if self.config.settle_delay_s:
            time.sleep(self.config.settle_delay_s)
        self._begin(task)
        self._screen = self._capture()
        return self._observation(self._screen)

    def _reset_device(self) -> None:
        config = self.config
        if config.reset_mode == "snapshot":
            port = config.console_port or console_port_for_serial(self.serial or "")
            if port is None:
                raise ConsoleError(
                    f"no console port for {self.link.where}: set AdbEnvConfig.console_port", self.serial
                )
            with EmulatorConsole(
                config.console_host, port, config.console_auth_token_path, config.step_timeout_s
            ) as console:
                console.snapshot_load(config.snapshot_name)
            return
        for command in config.reset_commands:
            result = self.link.shell(command, idempotent=True)
            if result.exit_code != 0:
                raise RuntimeError(
                    f"reset command {command!r} exited {result.exit_code}: {result.text.strip()[:200]}"
                )

    # -- step ---------------------------------------------------------------------------------------
    def _perform(self, action: Action) -> tuple[str | None, dict[str, Any]]:
        """Run the action's commands; (why it is invalid or None, ``action_lost``/``action_error``)."""
        assert self._screen is not None and self.link.screen_size is not None
        try:
            commands = action_to_commands(
                action, self._screen.elements, self.link.screen_size, self.config.app_packages
            )
        except UnexecutableAction as error:
            return str(error), {}
        extra: dict[str, Any] = {}
        for command in commands:
            result = self.link.shell(command, idempotent=False)
            if result.exit_code == -1:  # the transport dropped mid-command: the action may not have happened
                extra["action_lost"] = True
                break
            if result.exit_code != 0:
                extra["action_error"] = result.text.strip()[:300]
                break
        return None, extra

    def step(self, action: Action | str) -> StepResult:
        task = self._running_task()
        if isinstance(action, str):
            action = parse_action(action)
        started = time.perf_counter()
        reconnects_before = self.link.reconnects
        invalid_reason = action.reason if not action.is_valid else None
        extra: dict[str, Any] = {}
        if action.is_valid:
            invalid_reason, extra = self._perform(action)
            if action.kind is not ActionKind.STATUS and self.config.settle_delay_s:
                time.sleep(self.config.settle_delay_s)
        check = self.config.success_check
        success = bool(check(self.link, task)) if check is not None else False
        horizon = self.config.max_steps or getattr(task, "horizon", None) or DEFAULT_HORIZON
        rules = EpisodeRules(horizon, self.config.invalid_action_penalty)
        outcome = self._record(action, success=success, invalid_reason=invalid_reason, rules=rules)
        self._screen = self._capture()
        info = outcome.info(
            time.perf_counter() - started,
            offline_waits=self.link.reconnects - reconnects_before,
            success_known=check is not None,
            serial=self.serial,
            **extra,
        )
        return StepResult(
            self._observation(self._screen), outcome.reward, outcome.done, info, outcome.truncated
        )
