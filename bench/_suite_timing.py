"""A pytest plugin (`-p bench._suite_timing`) that records each test's wall and CPU seconds.

CPU counts this process and the children it has reaped (the servers, workers and ranks a test
starts and stops), so a test's CPU/wall ratio says how much of its time it computes and how much it
waits. Each pytest-xdist worker writes its own file into `$SUITE_TIMING_DIR`.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Generator
from pathlib import Path

import pytest

_ROWS: dict[str, tuple[float, float]] = {}


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    wall, cpu = time.perf_counter(), _cpu_seconds()
    yield  # setup, call and teardown: a module fixture's cost lands on its first and last test
    _ROWS[item.nodeid] = (time.perf_counter() - wall, _cpu_seconds() - cpu)


def pytest_sessionfinish(session: pytest.Session) -> None:
    folder = os.environ.get("SUITE_TIMING_DIR")
    if folder:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        (Path(folder) / f"{worker}.json").write_text(json.dumps(_ROWS))
