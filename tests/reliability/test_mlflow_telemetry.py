"""No MLflow telemetry thread in a `distrl` process or in a process `distrl up` starts.

MLflow counts `DO_NOT_TRACK` only when it is "true" (the stack sets "1"), so its telemetry client
started, failed to reach its server (there is no network) and, from its own thread, popped
`_MLFLOW_TELEMETRY_SESSION_ID` from os.environ while a collector's metrics thread was inside an HTTP
call iterating os.environ for proxies: `log_batch` failed with KeyError and a collector run with it.
"""

from __future__ import annotations

import os
import subprocess
import sys

from ops.quiet import QUIET_ENV

# Each of these alone switches MLflow's telemetry off; the child has none of them.
_OFF_SWITCHES = ("MLFLOW_DISABLE_TELEMETRY", "PYTEST_CURRENT_TEST", "CI", "GITHUB_ACTIONS")
_PROBE = """
import mlflow  # noqa: F401  (the telemetry client starts at import)
from mlflow.telemetry import get_telemetry_client
print("off" if get_telemetry_client() is None else "on")
"""


def _telemetry(extra: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if k not in _OFF_SWITCHES} | extra
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    return done.stdout.strip().splitlines()[-1]


def test_distrl_processes_and_the_stacks_children_start_no_mlflow_telemetry() -> None:
    assert _telemetry({"DO_NOT_TRACK": "1"}) == "on"  # what the stack's "1" alone left
    # `distrl` sets QUIET_ENV in its own process first thing, and in every child of `distrl up`.
    assert _telemetry({"DO_NOT_TRACK": "1", **QUIET_ENV}) == "off"
