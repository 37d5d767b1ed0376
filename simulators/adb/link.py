"""The ADB environment's connection to one device: shell commands with timeouts, offline detection and
reconnection, screenshots and UI dumps with retries. Every failure leaves here as a typed AdbEnvError.

Commands run over the shell v2 protocol (exit status and stderr come back separately); a stream that
ends without an exit status means the transport dropped (device went offline, emulator crashed), which
is told apart from a command that merely failed.
"""

from __future__ import annotations

import logging
import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import adbutils
import numpy as np
from adbutils.errors import AdbConnectionError as AdbutilsConnectionError
from adbutils.errors import AdbError, AdbTimeout

from distrl_core.envs.observation import UIElement
from simulators.adb.config import AdbEnvConfig
from simulators.adb.dump import DumpLimits, parse_dump
from simulators.adb.errors import (
    AdbConnectionError,
    DeviceOfflineError,
    ScreenshotError,
    StepTimeoutError,
    UiDumpError,
)
from simulators.adb.frames import frame_problem
from simulators.screen_frames import RawScreencapError, is_blank, parse_screencap

logger = logging.getLogger(__name__)
_Frame = TypeVar("_Frame")  # what a capture returns: PNG bytes or an RGB array

MAX_BACKOFF_S = 8.0
_SIZE = re.compile(r"(?:Override|Physical) size: (\d+)x(\d+)")
_FOCUS = re.compile(r"mCurrentFocus=Window\{[^}]*?\s(?P<component>[\w.$]+/[\w.$]+)\}")
_RESUMED = re.compile(r"mResumedActivity: ActivityRecord\{[^}]*?\s(?P<component>[\w.$]+/[\w.$]+)\s")


@dataclass(frozen=True)
class ShellResult:
    stdout: bytes
    stderr: bytes
    exit_code: int

    @property
    def text(self) -> str:
        return (self.stdout + self.stderr).decode("utf-8", errors="replace")


class _TransportLost(Exception):
    """The device stream ended or was refused: the device may be offline, missing or restarting."""


class AdbDeviceLink:
    """One device behind one adb server, as the environment uses it."""

    def __init__(self, config: AdbEnvConfig):
        self.config = config
        self.client = adbutils.AdbClient(
            host=config.host, port=config.port, socket_timeout=config.step_timeout_s
        )
        self.serial = config.serial
        self.device: adbutils.AdbDevice | None = None
        self.screen_size: tuple[int, int] | None = None
        self.reconnects = 0

    @property
    def where(self) -> str:
        return f"{self.serial or '<any device>'} via adb server {self.config.host}:{self.config.port}"

    # -- connection -----------------------------------------------------------------------------
    def connect(self) -> None:
        """Find the device, wait for it to be online, read its screen size."""
        if self.serial is None:
            ready = [info.serial for info in self._list_devices() if info.state == "device"]
            if len(ready) != 1:
                raise DeviceOfflineError(
                    f"AdbEnvConfig.serial is None but the adb server at {self.config.host}:{self.config.port} has "
                    f"{len(ready)} online devices ({ready}); set serial to one of them",
                )
            self.serial = ready[0]
        self.wait_until_online()
        size = _SIZE.search(self.shell("wm size", idempotent=True).text)
        if size is None:
            raise AdbConnectionError(
                f"`wm size` on {self.where} printed no screen size; is it an Android device?", self.serial
            )
        self.screen_size = (int(size.group(1)), int(size.group(2)))

    def _attach(self, info: adbutils.AdbDeviceInfo) -> None:
        # Addressing the device by transport id skips the version query adbutils makes before every
        # serial-addressed command (one connection instead of two per command). A device that
        # reconnects gets a new id; the next command then fails, and waiting for it re-attaches.
        transport_id = info.tags.get("transport_id", "")
        if transport_id.isdigit():
            self.device = adbutils.AdbDevice(self.client, transport_id=int(transport_id))
        else:
            self.device = self.client.device(serial=info.serial)

    def _list_devices(self, extended: bool = False) -> list[adbutils.AdbDeviceInfo]:
        try:
            return list(self.client.list(extended=extended))
        except (AdbutilsConnectionError, AdbTimeout, OSError) as error:
            raise AdbConnectionError(
                f"cannot reach the adb server at {self.config.host}:{self.config.port} ({error}); start it "
                "(`adb start-server`, or `distrl fake-adb --port P`) or fix AdbEnvConfig.host/port",
                self.serial,
            ) from error

    def wait_until_online(self) -> None:
        """Return once the device is listed as ``device``; back off and retry, then DeviceOfflineError."""
        attempts = self.config.reconnect_attempts
        delay = self.config.reconnect_backoff_s
        state = "absent"
        for attempt in range(attempts + 1):
            info = next(
                (info for info in self._list_devices(extended=True) if info.serial == self.serial), None
            )
            state = info.state if info else "absent"
            if info is not None and state == "device":
                self._attach(info)
                if attempt:
                    self.reconnects += 1
                    logger.info("%s is back online after %d checks", self.where, attempt)
                return
            if attempt < attempts:
                self._try_reconnect()
                time.sleep(min(delay * 2**attempt, MAX_BACKOFF_S))
        raise DeviceOfflineError(
            f"device {self.where} is {state} after {attempts + 1} checks with backoff; restart the emulator "
            "or reconnect the device (`adb reconnect`), then retry the episode",
            self.serial,
        )

    def _try_reconnect(self) -> None:
        # Network devices (host:port serials) can be re-attached by the server; emulators and USB cannot.
        if self.serial and ":" in self.serial:
            try:
                self.client.connect(self.serial, timeout=self.config.step_timeout_s)
            except (AdbError, OSError) as error:
                logger.debug("adb connect %s failed: %s", self.serial, error)

    # -- shell ----------------------------------------------------------------------------------
    def shell(self, command: str, *, idempotent: bool) -> ShellResult:
        """Run ``command``; after a dropped transport wait for the device, and re-run it only if
        ``idempotent`` (re-running a tap could tap twice). A non-idempotent command that was cut off
        returns exit code -1 instead."""
        try:
            return self._shell_once(command)
        except _TransportLost as lost:
            logger.info(
                "transport to %s lost during %r (%s); waiting for the device", self.where, command, lost
            )
            self.wait_until_online()
            if not idempotent:
                return ShellResult(b"", f"transport lost: {lost}".encode(), -1)
        try:
            return self._shell_once(command)
        except _TransportLost as lost:
            raise DeviceOfflineError(
                f"device {self.where} dropped the connection twice running {command!r} ({lost}); restart it",
                self.serial,
            ) from lost

    def _shell_once(self, command: str) -> ShellResult:
        if self.device is None:
            raise AdbConnectionError(
                f"AdbEnv is not connected to {self.where}: call reset() first", self.serial
            )
        try:
            raw = self.device.shell2(command, timeout=self.config.step_timeout_s, encoding=None, v2=True)
        except AdbTimeout as error:
            raise StepTimeoutError(
                f"{command!r} on {self.where} took longer than step_timeout_s={self.config.step_timeout_s}s; "
                "raise the timeout if the device is just slow, else restart it",
                self.serial,
            ) from error
        except AdbutilsConnectionError as error:
            raise AdbConnectionError(
                f"lost the adb server at {self.config.host}:{self.config.port} ({error}); restart it and retry",
                self.serial,
            ) from error
        except (EOFError, OSError) as error:  # reset, broken pipe, closed mid-stream
            raise _TransportLost(str(error) or type(error).__name__) from error
        except AdbError as error:  # FAIL from the server: offline, not found, unauthorized...
            raise _TransportLost(str(error)) from error
        return ShellResult(raw.stdout, raw.stderr, raw.returncode)

    # -- observation ----------------------------------------------------------------------------
    def screenshot(self) -> bytes:
        def check(png: bytes) -> tuple[bytes | None, str]:
            problem = frame_problem(png) or ""
            return (None if problem else png), problem

        return self._capture("screencap -p", check)

    def screenshot_pixels(self) -> np.ndarray[Any, Any]:
        """The screen as RGB pixels from raw ``screencap`` (no ``-p``): the phone skips its PNG
        encoding, the slowest part of a capture, and nobody decodes one. Retried as
        :meth:`screenshot` retries a bad frame (short, unparseable, all black or all white)."""

        def check(raw: bytes) -> tuple[np.ndarray[Any, Any] | None, str]:
            try:
                pixels = parse_screencap(raw)
            except RawScreencapError as error:
                return None, str(error)
            return (None, "all-black or all-white frame") if is_blank(pixels) else (pixels, "")

        return self._capture("screencap", check)

    def _capture(self, command: str, check: Callable[[bytes], tuple[_Frame | None, str]]) -> _Frame:
        """``command``'s output as ``check`` reads it, captured again after a bad frame, up to
        ``screenshot_retries`` times (a screen mid-animation or asleep gives one)."""
        problem = ""
        for attempt in range(self.config.screenshot_retries + 1):
            if attempt:
                time.sleep(self.config.retry_delay_s)
            frame, problem = check(self.shell(command, idempotent=True).stdout)
            if frame is not None:
                return frame
            logger.info("bad frame from %s (%s), attempt %d", self.where, problem, attempt + 1)
        raise ScreenshotError(
            f"{command} on {self.where} gave a bad frame {self.config.screenshot_retries + 1} times (last: {problem}); "
            "wake the screen (`input keyevent KEYCODE_WAKEUP`) or restart the emulator",
            self.serial,
        )

    def ui_dump(self) -> tuple[str, list[UIElement]]:
        """The uiautomator XML and its parsed elements, retrying "could not get idle state" and
        malformed XML; a dump past a limit (`simulators.adb.dump`) raises at once."""
        path = shlex.quote(self.config.dump_path)
        limits = DumpLimits(
            self.config.max_ui_dump_bytes,
            self.config.max_ui_depth,
            self.config.max_ui_nodes,
            self.where,
            self.serial,
        )
        problem, malformed = "", False
        for attempt in range(self.config.ui_dump_retries + 1):
            if attempt:
                time.sleep(self.config.retry_delay_s)
            deadline = time.monotonic() + self.config.step_timeout_s
            if self.config.pull_with == "cat":
                result = self.shell(f"uiautomator dump {path} >/dev/null && cat {path}", idempotent=True)
                if len(result.stdout) > limits.max_bytes:
                    raise limits.too_large(len(result.stdout))
                xml = result.stdout.decode("utf-8", errors="replace") if result.exit_code == 0 else ""
            else:
                result = self.shell(f"uiautomator dump {path}", idempotent=True)
                xml = self._pull_text(self.config.dump_path, limits) if result.exit_code == 0 else ""
            if not xml:
                problem, malformed = result.text.strip()[:200] or f"exit code {result.exit_code}", False
                continue
            try:
                return xml, parse_dump(xml, limits, deadline)
            except ValueError as error:
                problem, malformed = str(error)[:200], True
        attempts = self.config.ui_dump_retries + 1
        if malformed:
            raise UiDumpError(
                f"uiautomator dump on {self.where} was not readable XML {attempts} times (last: {problem}); "
                "the device writes a broken dump: restart the app or the device, or try pull_with='cat'",
                self.serial,
            )
        raise UiDumpError(
            f"uiautomator dump on {self.where} failed {attempts} times (last: {problem}); "
            "the screen may be animating: raise ui_dump_retries or settle_delay_s",
            self.serial,
        )

    def _pull_text(self, path: str, limits: DumpLimits) -> str:
        """The file's text, refused past `limits.max_bytes` by its size before it is read (and while it
        is read, should it grow meanwhile)."""
        assert self.device is not None
        try:
            size = self.device.sync.stat(path).size
            if size > limits.max_bytes:
                raise limits.too_large(size)
            data = bytearray()
            chunks = self.device.sync.iter_content(path)
            try:
                for chunk in chunks:
                    data += chunk
                    if len(data) > limits.max_bytes:
                        raise limits.too_large(f"more than {len(data)}")
            finally:
                getattr(chunks, "close", lambda: None)()  # an early stop closes the sync connection
            return data.decode("utf-8", errors="replace")
        except AdbTimeout as error:
            raise StepTimeoutError(f"pulling {path} from {self.where} timed out", self.serial) from error
        except (AdbError, EOFError, OSError) as error:
            logger.info("pull %s from %s failed: %s", path, self.where, error)
            return ""

    def current_activity(self) -> str:
        """``package/activity`` in the foreground (short form, ``pkg/.Main``), or "" when dumpsys does not say."""
        match = _FOCUS.search(self.shell("dumpsys window windows", idempotent=True).text)
        if match is None:  # focus can be null (keyguard, a transition): the resumed activity still says it
            match = _RESUMED.search(self.shell("dumpsys activity activities", idempotent=True).text)
        return short_component(match.group("component")) if match else ""


def short_component(component: str) -> str:
    """``pkg/pkg.ui.Main`` -> ``pkg/.ui.Main``: the form ``am`` and ActivityRecord print (and SimDroid uses)."""
    package, _, activity = component.partition("/")
    if activity.startswith(package + "."):
        activity = activity[len(package) :]
    return f"{package}/{activity}"
