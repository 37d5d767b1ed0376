"""Typed failures of the ADB environment, each one something a collector can act on.

Every message names the device (serial, adb server address) and says what to do about it. The
``retry_same_device`` flag tells a collector whether trying the episode again on the same device makes
sense (a dropped frame, a timeout) or whether the device needs attention first (server down, reset broken).
"""

from __future__ import annotations


class AdbEnvError(RuntimeError):
    """Base of every ADB environment error."""

    retry_same_device = True

    def __init__(self, message: str, serial: str | None = None):
        super().__init__(message)
        self.serial = serial


class AdbConnectionError(AdbEnvError):
    """The adb server cannot be reached (not running, wrong host/port, or it closed the socket)."""

    retry_same_device = False


class DeviceOfflineError(AdbEnvError):
    """The device is missing or offline and did not come back within the reconnection attempts."""

    retry_same_device = False


class StepTimeoutError(AdbEnvError):
    """An adb command did not finish within the step timeout."""


class ScreenshotError(AdbEnvError):
    """``screencap`` kept returning undecodable, all-black or all-white frames."""


class UiDumpError(AdbEnvError):
    """``uiautomator dump`` kept failing (e.g. "could not get idle state") or produced unreadable XML."""


class ResetError(AdbEnvError):
    """Putting the device into the task's start state failed (snapshot load, reset commands, task loader)."""

    retry_same_device = False


class ConsoleError(AdbEnvError):
    """The emulator console refused a command (``KO: ...``), rejected the auth token, or is unreachable."""

    retry_same_device = False
