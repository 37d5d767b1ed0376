"""The ADB environment: drive a real Android device or emulator (or the fake ADB server) through adbutils."""

from distrl_core.envs.adb.config import AdbEnvConfig
from distrl_core.envs.adb.console import EmulatorConsole
from distrl_core.envs.adb.env import AdbEnv, StepResult, simdroid_success_check, simdroid_task_loader
from distrl_core.envs.adb.errors import (
    AdbConnectionError,
    AdbEnvError,
    ConsoleError,
    DeviceOfflineError,
    ResetError,
    ScreenshotError,
    StepTimeoutError,
    UiDumpError,
)
from distrl_core.envs.adb.link import AdbDeviceLink

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
