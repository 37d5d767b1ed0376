"""The environments a collector steps, built from its `CollectorParams`: SimDroids (with the
emulator-like latency asked for) or devices behind an ADB server, the fake one or real ones."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, assert_never

from distrl_core.envs.protocol import Environment
from simulators.factory import make_env
from simulators.sim_env import SimDroidEnvConfig
from simulators.simdroid.device import SimDroidConfig
from simulators.simdroid.faults import FaultConfig

if TYPE_CHECKING:
    from simulators.adb import AdbEnvConfig
    from tasks.collector import CollectorParams


def make_collector_envs(params: CollectorParams, rng: random.Random) -> list[Environment]:
    """The collector's environments, kept for its lifetime (emulators are slow to set up)."""
    match params.env_kind:
        case "sim":
            return [
                make_env(_env_config(params, rng.getrandbits(31), f"sim-{params.collector_id}-{i}"))
                for i in range(params.num_envs)
            ]
        case "adb":
            return [make_env(config) for config in _adb_configs(params)]
        case _:
            assert_never(params.env_kind)  # mypy: every EnvKind is built above


def _adb_configs(params: CollectorParams) -> list[AdbEnvConfig]:
    return [
        adb_env_config(
            params.adb_host,
            params.adb_port,
            serial,
            fake_server=params.adb_fake_server,
            screenshots=params.screenshots,
            observation=params.observation,
        )
        for serial in params.serials
    ]


def adb_env_config(
    host: str, port: int, serial: str, *, fake_server: bool, screenshots: bool = False, **overrides: Any
) -> AdbEnvConfig:
    """One device as collectors drive it: behind `distrl fake-adb` (tasks loaded and checked through
    its simdroid shell commands) or real (reset to HOME, scored by rule checks)."""
    from simulators.adb import AdbEnvConfig
    from simulators.adb.env import simdroid_success_check, simdroid_task_loader
    from simulators.adb_checks import adb_rule_success_check

    hooks: dict[str, Any] = (
        {"task_loader": simdroid_task_loader, "success_check": simdroid_success_check, "settle_delay_s": 0.0}
        if fake_server
        else {"success_check": adb_rule_success_check, "reset_commands": ["input keyevent KEYCODE_HOME"]}
    )
    return AdbEnvConfig(host=host, port=port, serial=serial, screenshots=screenshots, **hooks | overrides)


def _env_config(params: CollectorParams, seed: int, serial: str) -> SimDroidEnvConfig:
    faults = FaultConfig(seed=seed)
    if params.step_latency_s > 0:
        faults = FaultConfig(
            seed=seed,
            latency="emulator",
            latency_scale_s=params.step_latency_s,
            task_latency_sigma=params.task_latency_sigma,
            latency_mode="sleep",
        )
    device = SimDroidConfig(distractor_prob=0.1, faults=faults)
    return SimDroidEnvConfig(
        device=device,
        screenshots=params.screenshots,
        ui_xml=False,
        seed=seed,
        serial=serial,
        observation=params.observation,
    )
