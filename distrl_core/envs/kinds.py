"""The kinds of environment, as trajectory rows record them in ``env_kind``: the one list of them.

``storage.schema`` accepts exactly these values, ``tasks.collector.CollectorParams.env_kind``
takes them, and ``simulators.factory.make_env`` builds each kind's environment from its
config. This module imports nothing, so storage can use it without loading distrl_core's
libraries (torch).
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["ENV_KINDS", "EnvKind"]

EnvKind = Literal["sim", "adb"]
"""``sim``: a SimDroid (``SimDroidEnv``); ``adb``: a device behind an ADB server (``AdbEnv``)."""

ENV_KINDS: tuple[EnvKind, ...] = get_args(EnvKind)
