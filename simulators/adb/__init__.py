"""The ADB environment: drive a real Android device or emulator (or the fake ADB server) through adbutils."""

from simulators.adb.config import AdbEnvConfig
from simulators.adb.console import EmulatorConsole
from simulators.adb.env import AdbEnv, StepResult, simdroid_success_check, simdroid_task_loader
from simulators.adb.errors import (
    AdbConnectionError,
    AdbEnvError,
    ConsoleError,
    DeviceOfflineError,
    ResetError,
    ScreenshotError,
    StepTimeoutError,
    UiDumpError,
)
from simulators.adb.link import AdbDeviceLink

__all__ = [
    "AdbConnectionError",
    "AdbDeviceLink",
    "AdbEnv",
    "AdbEnvConfig",
    "AdbEnvError",
    "ConsoleError",
    "DeviceOfflineError",
    "EmulatorConsole",
    "ResetError",
    "ScreenshotError",
    "StepResult",
    "StepTimeoutError",
    "UiDumpError",
    "simdroid_success_check",
    "simdroid_task_loader",
]
