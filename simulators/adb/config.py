"""Configuration of the ADB environment: one dataclass, validated in one place."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from simulators.adb.commands import DEFAULT_APP_PACKAGES
from simulators.adb.console import DEFAULT_TOKEN_PATH

# (link, task, episode seed or None) -> None: puts the device into the task's start state after the
# reset. The link is an AdbDeviceLink: ``link.shell(cmd, idempotent=True)``, ``link.device`` (adbutils).
TaskLoader = Callable[[Any, Any, int | None], None]
# (link, task) -> bool: whether the task is done, read from the device (see evaluators.adb_checks).
SuccessCheck = Callable[[Any, Any], bool]


@dataclass
class AdbEnvConfig:
    """How to reach and drive one Android device over ADB.

    host, port: the adb server (``adb start-server`` listens on 127.0.0.1:5037; the fake server on any).
    serial: the device (``adb devices``); None means the only device the server lists.
    screenshots: capture ``screencap -p`` each step (off for text-only policies: saves ~30% per step).
    observation: "tree" reads the policy's elements from ``uiautomator dump``; "screen" from an OCR
        of the screenshot alone (``make_env`` wraps the env in ``simulators.screen_env.ScreenEnv``
        and no UI dump is taken: games, WebViews and animating screens have none worth reading):
        ``screencap -p`` with ``screenshots``, else raw ``screencap`` pixels (no PNG encoded).
    step_timeout_s: limit for any single adb command; a command past it raises StepTimeoutError.
    settle_delay_s: pause after an action before observing, so animations finish (0 for the simulator).
    ui_dump_retries: extra ``uiautomator dump`` attempts after "could not get idle state".
    screenshot_retries: extra ``screencap`` attempts after a corrupt, all-black or all-white frame.
    retry_delay_s: pause between those attempts.
    dump_path: where ``uiautomator dump`` writes on the device.
    max_ui_dump_bytes, max_ui_depth, max_ui_nodes: the largest dump read (with ``pull_with="sync"`` a
        larger file is refused before it is read; with ``"cat"`` after), the deepest nesting and the
        most nodes parsed; a real screen's dump is tens of kilobytes, a few dozen levels deep. Parsing
        stops at ``step_timeout_s`` from the start of the dump. Past any of them: UiDumpError naming it.
    pull_with: read the dump back with the sync protocol (``"sync"``, like ``adb pull``) or ``"cat"``.
    reset_mode: ``"snapshot"`` loads ``snapshot_name`` through the emulator console (emulators only);
        ``"commands"`` runs ``reset_commands`` in the device shell (any device).
    snapshot_name: the emulator snapshot holding the clean start state (save it once with
        ``EmulatorConsole.snapshot_save`` or ``adb emu avd snapshot save <name>``).
    console_host, console_port: the emulator console; port None derives it from the serial
        (emulator-5554 -> 5554).
    console_auth_token_path: the console auth token file (``~/.emulator_console_auth_token``).
    reset_commands: shell commands for ``reset_mode="commands"``; each must exit 0.
    reset_retries: extra reset attempts before ResetError.
    task_loader: optional ``(link, task, seed) -> None`` run after the reset to set the task up (e.g.
        ``simdroid_task_loader`` for the fake server, or a real-device setup script).
    success_check: optional ``(link, task) -> bool`` run after every step; it ends the episode with
        reward 1 on success (``simdroid_success_check`` for the fake server,
        ``evaluators.adb_checks.adb_rule_success_check`` for rule-checked real-device tasks). Without
        one, success is unknown during the episode (always False) and a judge scores it afterwards.
    reconnect_attempts, reconnect_backoff_s: when the device is offline or the connection drops, check
        again this many times, waiting backoff, 2x backoff, ... (capped at 8 s) before DeviceOfflineError.
    max_steps: episode step limit; None uses the task's horizon (10 General, 20 Web Shopping), or 10
        for tasks without one.
    invalid_action_penalty: reward added for an invalid action (<= 0; DigiRL uses none, so 0.0).
    app_packages: display name (lower case) -> package for ``open_app``; defaults cover SimDroid's apps.
    """

    host: str = "127.0.0.1"
    port: int = 5037
    serial: str | None = None
    screenshots: bool = True
    observation: Literal["tree", "screen"] = "tree"
    step_timeout_s: float = 30.0
    settle_delay_s: float = 0.5
    ui_dump_retries: int = 3
    screenshot_retries: int = 2
    retry_delay_s: float = 0.2
    dump_path: str = "/sdcard/window_dump.xml"
    max_ui_dump_bytes: int = 4 * 1024 * 1024
    max_ui_depth: int = 256
    max_ui_nodes: int = 20_000
    pull_with: Literal["sync", "cat"] = "sync"
    reset_mode: Literal["snapshot", "commands"] = "commands"
    snapshot_name: str = "distrl_clean"
    console_host: str = "127.0.0.1"
    console_port: int | None = None
    console_auth_token_path: Path = DEFAULT_TOKEN_PATH
    reset_commands: tuple[str, ...] = ("input keyevent KEYCODE_HOME",)
    reset_retries: int = 2
    task_loader: TaskLoader | None = None
    success_check: SuccessCheck | None = None
    reconnect_attempts: int = 4
    reconnect_backoff_s: float = 0.5
    max_steps: int | None = None
    invalid_action_penalty: float = 0.0
    app_packages: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_APP_PACKAGES))

    def __post_init__(self) -> None:
        problems = [*self._link_problems(), *self._reset_problems(), *self._episode_problems()]
        if self.observation not in ("tree", "screen"):
            problems.append(f"observation must be 'tree' or 'screen', got {self.observation!r}")
        if problems:
            raise ValueError("invalid AdbEnvConfig: " + "; ".join(problems))
        self.reset_commands = tuple(self.reset_commands)
        self.console_auth_token_path = Path(self.console_auth_token_path)

    def _link_problems(self) -> list[str]:
        problems = []
        if not 0 < self.port <= 65535:
            problems.append(f"port must be 1..65535 (the adb server's port, usually 5037), got {self.port}")
        if self.step_timeout_s <= 0:
            problems.append(f"step_timeout_s must be > 0 seconds, got {self.step_timeout_s}")
        for name in ("settle_delay_s", "retry_delay_s", "reconnect_backoff_s"):
            if getattr(self, name) < 0:
                problems.append(f"{name} must be >= 0 seconds, got {getattr(self, name)}")
        for name in ("ui_dump_retries", "screenshot_retries", "reset_retries", "reconnect_attempts"):
            if getattr(self, name) < 0:
                problems.append(f"{name} must be >= 0 (extra attempts), got {getattr(self, name)}")
        for name, least in (("max_ui_dump_bytes", 1024), ("max_ui_depth", 8), ("max_ui_nodes", 16)):
            if getattr(self, name) < least:
                problems.append(
                    f"{name} must be >= {least} (a screen's dump needs it), got {getattr(self, name)}"
                )
        if self.pull_with not in ("sync", "cat"):
            problems.append(f"pull_with must be 'sync' or 'cat', got {self.pull_with!r}")
        return problems

    def _reset_problems(self) -> list[str]:
        problems = []
        if self.reset_mode not in ("snapshot", "commands"):
            problems.append(
                f"reset_mode must be 'snapshot' (emulator console) or 'commands', got {self.reset_mode!r}"
            )
        if self.reset_mode == "snapshot" and not self.snapshot_name.strip():
            problems.append("reset_mode='snapshot' needs a snapshot_name")
        if (
            self.reset_mode == "snapshot"
            and self.console_port is None
            and not (self.serial or "").startswith("emulator-")
        ):
            problems.append(
                "reset_mode='snapshot' needs console_port, or a serial like emulator-5554 to derive it from"
            )
        if self.console_port is not None and not 0 < self.console_port <= 65535:
            problems.append(f"console_port must be 1..65535, got {self.console_port}")
        return problems

    def _episode_problems(self) -> list[str]:
        problems = []
        if self.max_steps is not None and self.max_steps < 1:
            problems.append(f"max_steps must be >= 1 or None (use the task's horizon), got {self.max_steps}")
        if self.invalid_action_penalty > 0:
            problems.append(
                f"invalid_action_penalty is a penalty: use a value <= 0, got {self.invalid_action_penalty}"
            )
        if not self.dump_path.startswith("/"):
            problems.append(
                f"dump_path must be an absolute device path like /sdcard/window_dump.xml, got {self.dump_path!r}"
            )
        return problems
