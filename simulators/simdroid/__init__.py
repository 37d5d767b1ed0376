"""SimDroid: a deterministic, fast Android-like device for offline RL (docs/architecture.md, "SimDroid")."""

from distrl_core.envs.protocol import Task
from simulators.simdroid.device import (
    DeviceOffline,
    FaultConfig,
    ResetFailed,
    SimDroid,
    SimDroidConfig,
    UnknownPackage,
)
from simulators.simdroid.tasks import get_task, load_tasks

__all__ = [
    "DeviceOffline",
    "FaultConfig",
    "ResetFailed",
    "SimDroid",
    "SimDroidConfig",
    "Task",
    "UnknownPackage",
    "get_task",
    "load_tasks",
]
