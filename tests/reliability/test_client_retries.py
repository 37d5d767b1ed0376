"""Prefect's client retries a 503 with backoff 2, 4, ... 2**N seconds, uncapped, so the retry count
bounds how long one request can hold a flow open. With 20 retries an embedded run's collector slept
~34 minutes on its 11th try and held a finished 30-minute run open for an hour; every client the
project configures now waits at most ~8.5 minutes on one request."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LONGEST_WAIT_S = 600  # one request's worst case, all backoffs together


def _worst_wait_s(retries: int) -> int:
    return sum(2**attempt for attempt in range(1, retries + 1))


def test_an_embedded_command_bounds_one_requests_retries(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_CLIENT_MAX_RETRIES"}
    script = (
        "import os; from ops.embedded import configure_embedded; "
        f"configure_embedded({str(tmp_path)!r}, first_start=False); "
        "print(os.environ['PREFECT_CLIENT_MAX_RETRIES'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    retries = int(out.stdout.split()[-1])
    assert retries >= 5  # a burst of 503s on a loaded SQLite server still gets through (Prefect's default)
    assert _worst_wait_s(retries) <= LONGEST_WAIT_S


def test_the_stack_and_the_embedded_commands_retry_alike() -> None:
    from ops import embedded, up_env

    assert up_env.CLIENT_MAX_RETRIES == embedded.CLIENT_MAX_RETRIES
    assert _worst_wait_s(up_env.CLIENT_MAX_RETRIES) <= LONGEST_WAIT_S
