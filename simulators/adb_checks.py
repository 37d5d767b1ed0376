"""Rule-based success checks over ADB, for real devices (AndroidWorld style).

A task's success is read from the device, not from the screen pixels: a setting's value
(``settings get``), the app in the foreground (``dumpsys window`` / ``dumpsys activity activities``),
or text on screen (``uiautomator dump``). Each rule is a small frozen dataclass with a ``check(device)``;
a task holds a tuple of rules that must all hold. :data:`STARTER_TASKS` is a set of real-device tasks
defined this way, and :func:`rules_for_simdroid_task` derives rules for the SimDroid task kinds whose
success ADB can observe, so the same tasks can be judged on an emulator through the fake server.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any, Protocol

from distrl_core.envs.observation import parse_ui_xml
from distrl_core.evaluators.base import EpisodeContext, EvalResult, Verdict
from simulators.simdroid.catalog import APP_BY_NAME, BRIGHTNESS_MAX, SETTINGS, TOGGLE_BY_KEY

SOURCE = "adb_rules"
TIMEOUT_S = 10.0  # per adb command; a device slower than this is treated as unreachable (UNKNOWN)
_DUMP_PATH = "/sdcard/distrl_check_dump.xml"
_FOCUS = re.compile(r"mCurrentFocus=Window\{[^}]*?\s(?P<component>[\w.$]+/[\w.$]+)\}")
_RESUMED = re.compile(r"mResumedActivity: ActivityRecord\{[^}]*?\s(?P<component>[\w.$]+/[\w.$]+)\s")


class ShellDevice(Protocol):
    """What the rules need from a device: adbutils' ``AdbDevice.shell``."""

    def shell(self, cmdargs: str, timeout: float | None = ...) -> str: ...


@dataclass(frozen=True)
class CheckResult:
    passed: bool
    detail: str


def current_component(device: ShellDevice, timeout_s: float = TIMEOUT_S) -> str | None:
    """``package/activity`` in the foreground, from dumpsys; None when it cannot be told."""
    match = _FOCUS.search(device.shell("dumpsys window windows", timeout=timeout_s))
    if match is None:  # focus can be null (keyguard, a transition): the resumed activity still says it
        match = _RESUMED.search(device.shell("dumpsys activity activities", timeout=timeout_s))
    return match.group("component") if match else None


def screen_texts(device: ShellDevice, timeout_s: float = TIMEOUT_S, attempts: int = 3) -> list[str]:
    """Every text and content-description in a fresh UI dump (retrying "could not get idle state")."""
    command = f"uiautomator dump {_DUMP_PATH} && cat {_DUMP_PATH}; rm -f {_DUMP_PATH}"
    problem = ""
    for _ in range(attempts):
        output = device.shell(command, timeout=timeout_s)
        if "<hierarchy" in output:
            elements = parse_ui_xml(output, keep_all=True)
            return [text for element in elements for text in (element.text, element.content_desc) if text]
        problem = output.strip()[:200]
    raise RuntimeError(f"uiautomator dump failed {attempts} times: {problem}")


@dataclass(frozen=True)
class SettingEquals:
    """``settings get <namespace> <key>`` prints ``expected``."""

    namespace: str
    key: str
    expected: str

    def check(self, device: ShellDevice) -> CheckResult:
        value = device.shell(
            f"settings get {self.namespace} {shlex.quote(self.key)}", timeout=TIMEOUT_S
        ).strip()
        return CheckResult(
            value == self.expected, f"{self.namespace}/{self.key}={value} (want {self.expected})"
        )


@dataclass(frozen=True)
class SettingInRange:
    """``settings get`` prints a number in [low, high]."""

    namespace: str
    key: str
    low: float
    high: float

    def check(self, device: ShellDevice) -> CheckResult:
        value = device.shell(
            f"settings get {self.namespace} {shlex.quote(self.key)}", timeout=TIMEOUT_S
        ).strip()
        try:
            passed = self.low <= float(value) <= self.high
        except ValueError:
            passed = False
        return CheckResult(passed, f"{self.namespace}/{self.key}={value} (want {self.low}..{self.high})")


@dataclass(frozen=True)
class ForegroundPackage:
    """The focused activity belongs to ``package``."""

    package: str

    def check(self, device: ShellDevice) -> CheckResult:
        component = current_component(device)
        package = component.split("/")[0] if component else None
        return CheckResult(package == self.package, f"foreground {component} (want {self.package})")


@dataclass(frozen=True)
class UiTextPresent:
    """Some on-screen text or content-description equals (or, unless ``exact``, contains) ``text``,
    ignoring case."""

    text: str
    exact: bool = False

    def check(self, device: ShellDevice) -> CheckResult:
        wanted = self.text.casefold()
        texts = screen_texts(device)
        found = next(
            (t for t in texts if (t.casefold() == wanted if self.exact else wanted in t.casefold())), None
        )
        return CheckResult(
            found is not None, f"screen text {found!r}" if found else f"no screen text matches {self.text!r}"
        )


Rule = SettingEquals | SettingInRange | ForegroundPackage | UiTextPresent


@dataclass(frozen=True)
class AdbTask:
    """A real-device task: an instruction and the rules that define its success."""

    task_id: str
    instruction: str
    rules: tuple[Rule, ...]


STARTER_TASKS: tuple[AdbTask, ...] = (
    AdbTask("adb-wifi-off", "Turn off Wi-Fi", (SettingEquals("global", "wifi_on", "0"),)),
    AdbTask("adb-wifi-on", "Turn on Wi-Fi", (SettingEquals("global", "wifi_on", "1"),)),
    AdbTask("adb-airplane-on", "Turn on airplane mode", (SettingEquals("global", "airplane_mode_on", "1"),)),
    AdbTask("adb-bluetooth-on", "Turn on Bluetooth", (SettingEquals("global", "bluetooth_on", "1"),)),
    AdbTask(
        "adb-brightness-max",
        "Set the screen brightness to the maximum",
        (SettingInRange("system", "screen_brightness", BRIGHTNESS_MAX * 0.98, BRIGHTNESS_MAX),),
    ),
    AdbTask("adb-open-settings", "Open the Settings app", (ForegroundPackage(SETTINGS),)),
    AdbTask("adb-open-clock", "Open the Clock app", (ForegroundPackage(APP_BY_NAME["clock"].package),)),
    AdbTask("adb-open-chrome", "Open Chrome", (ForegroundPackage(APP_BY_NAME["chrome"].package),)),
    AdbTask(
        "adb-display-settings",
        "Open the display settings",
        (ForegroundPackage(SETTINGS), UiTextPresent("Brightness level", exact=True)),
    ),
)
STARTER_TASK_BY_ID = {task.task_id: task for task in STARTER_TASKS}


def rules_for_simdroid_task(task: Any) -> tuple[Rule, ...] | None:
    """ADB-observable rules equivalent to a SimDroid task's success check; None for kinds ADB cannot
    observe without app internals (alarms, browser pages, carts)."""
    params = task.params
    if task.kind == "open_app":
        return (ForegroundPackage(params["package"]),)
    if task.kind == "toggle_setting":
        toggle = TOGGLE_BY_KEY[params["setting"]]
        return (
            SettingEquals(
                toggle.namespace, toggle.setting, toggle.on_value if params["on"] else toggle.off_value
            ),
        )
    if task.kind == "set_brightness":
        # SimDroid accepts within 2 percentage points of the target.
        low, high = ((params["percent"] + sign * 2.0) * BRIGHTNESS_MAX / 100 for sign in (-1, 1))
        return (SettingInRange("system", "screen_brightness", low, high),)
    return None


class AdbRuleEvaluator:
    """Evaluator over ADB: ``context.device`` is an adbutils ``AdbDevice``; ``context.task`` is an
    :class:`AdbTask` or a SimDroid task with ADB-observable success. Device errors give UNKNOWN."""

    def evaluate(self, context: EpisodeContext) -> EvalResult:
        task = context.task
        if isinstance(task, AdbTask):
            rules: tuple[Rule, ...] | None = task.rules
        elif task is not None and hasattr(task, "kind") and hasattr(task, "params"):
            rules = rules_for_simdroid_task(task)
        else:
            rules = None
        if not rules:
            return EvalResult(
                Verdict.UNKNOWN, f"no ADB rules for task {getattr(task, 'task_id', task)!r}", SOURCE
            )
        if context.device is None or not hasattr(context.device, "shell"):
            return EvalResult(Verdict.UNKNOWN, "no ADB device in the episode context", SOURCE)
        details = []
        try:
            for rule in rules:
                result = rule.check(context.device)
                details.append(result.detail)
                if not result.passed:
                    return EvalResult(Verdict.FAILURE, "; ".join(details), SOURCE)
        except Exception as error:  # adbutils raises AdbError, timeouts, socket errors: none is a verdict
            return EvalResult(
                Verdict.UNKNOWN, f"device check failed: {type(error).__name__}: {error}", SOURCE
            )
        return EvalResult(Verdict.SUCCESS, "; ".join(details), SOURCE)


def adb_rule_success_check(link: Any, task: Any) -> bool:
    """``AdbEnvConfig.success_check`` hook: the rules' verdict on ``link.device`` (UNKNOWN counts as no)."""
    context = EpisodeContext(instruction=getattr(task, "instruction", ""), task=task, device=link.device)
    return AdbRuleEvaluator().evaluate(context).success
