"""Build environments from their configuration: a ``SimDroidEnvConfig`` gives a SimDroid, an
``AdbEnvConfig`` a device behind an adb server. The device's serial is part of either config.
Any other config is refused by name: a new kind of environment (``distrl_core.envs.kinds``) is
added here too.

Example::

    from simulators.factory import make_env, make_sim_envs

    env = make_env(AdbEnvConfig(host="127.0.0.1", port=5037, serial="emulator-5554"))
    envs = make_sim_envs(SimDroidEnvConfig(screenshots=False), count=8, serial_prefix="sim-c0")
    [env.serial for env in envs]  # ["sim-c0-0", ..., "sim-c0-7"]
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, TypeAlias

from distrl_core.envs.kinds import EnvKind
from distrl_core.envs.protocol import Environment
from simulators.screen_env import readable_sim_config
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig

if TYPE_CHECKING:
    from simulators.adb.config import AdbEnvConfig

__all__ = ["CONFIG_OF_KIND", "EnvConfig", "make_env", "make_sim_envs"]

EnvConfig: TypeAlias = "SimDroidEnvConfig | AdbEnvConfig"  # the configs make_env builds from

CONFIG_OF_KIND: dict[EnvKind, str] = {"sim": "SimDroidEnvConfig", "adb": "AdbEnvConfig"}
"""Each kind's config class, by name (ADB's module loads adbutils, so it is imported only when used)."""


def make_env(config: EnvConfig) -> Environment:
    """The environment ``config`` describes; a config of no known kind raises TypeError naming it."""
    if isinstance(config, SimDroidEnvConfig):
        if config.observation == "screen":
            # A PNG only where the shards keep it; else the OCR reads the rendered pixels.
            return _on_screen(
                SimDroidEnv(readable_sim_config(config, config.screenshots)), config.screenshots
            )
        return SimDroidEnv(config)
    from simulators.adb.config import AdbEnvConfig
    from simulators.adb.env import AdbEnv

    if isinstance(config, AdbEnvConfig):
        if config.observation == "screen":
            # Kept screenshots come as `screencap -p`; else the OCR reads raw `screencap` pixels.
            return _on_screen(AdbEnv(config), config.screenshots)
        return AdbEnv(config)
    known = ", ".join(f"{name} ({kind!r})" for kind, name in CONFIG_OF_KIND.items())
    raise TypeError(
        f"make_env cannot build an environment from a {type(config).__name__}; it takes {known}. "
        "A new kind goes into distrl_core.envs.kinds.EnvKind and make_env (simulators/factory.py)"
    )


def make_sim_envs(config: SimDroidEnvConfig, count: int, serial_prefix: str) -> list[Environment]:
    """``count`` SimDroids sharing ``config``, with serials ``{serial_prefix}-0``, ``-1``, ..."""
    return [make_env(dataclasses.replace(config, serial=f"{serial_prefix}-{i}")) for i in range(count)]


def _on_screen(env: Environment, keep_screenshots: bool) -> Environment:
    """``env`` observed through its screenshots, read by the process's shared OCR model."""
    from simulators.ocr import shared_reader
    from simulators.screen_env import ScreenEnv

    return ScreenEnv(env, shared_reader(), keep_screenshots=keep_screenshots)
