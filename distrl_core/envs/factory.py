"""Build environments from their configuration: a ``SimDroidEnvConfig`` gives a SimDroid, an
``AdbEnvConfig`` a device behind an adb server. The device's serial is part of either config.

Example::

    from distrl_core.envs.factory import make_env, make_sim_envs

    env = make_env(AdbEnvConfig(host="127.0.0.1", port=5037, serial="emulator-5554"))
    envs = make_sim_envs(SimDroidEnvConfig(screenshots=False), count=8, serial_prefix="sim-c0")
    [env.serial for env in envs]  # ["sim-c0-0", ..., "sim-c0-7"]
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from distrl_core.envs.protocol import Environment
from distrl_core.envs.sim_env import SimDroidEnv, SimDroidEnvConfig

if TYPE_CHECKING:
    from distrl_core.envs.adb.config import AdbEnvConfig

__all__ = ["make_env", "make_sim_envs"]


def make_env(config: SimDroidEnvConfig | AdbEnvConfig) -> Environment:
    """The environment ``config`` describes (adbutils is imported only for an ADB config)."""
    if isinstance(config, SimDroidEnvConfig):
        return SimDroidEnv(config)
    from distrl_core.envs.adb.env import AdbEnv

    return AdbEnv(config)


def make_sim_envs(config: SimDroidEnvConfig, count: int, serial_prefix: str) -> list[SimDroidEnv]:
    """``count`` SimDroids sharing ``config``, with serials ``{serial_prefix}-0``, ``-1``, ..."""
    return [SimDroidEnv(dataclasses.replace(config, serial=f"{serial_prefix}-{i}")) for i in range(count)]
