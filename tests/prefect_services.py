"""Prefect's per-process event and log workers, forgotten between API servers.

Prefect keeps one events worker per process for "a running server", whichever server that is: it
reads PREFECT_API_URL once, when it first starts. A test process that talks to one server (a
`distrl up` stack) and later to another (the test harness) would send the second's events, from
which task runs are recorded, to the first, stopped one; and the harness's teardown would wait on
them forever. Under pytest-xdist any order of files can share a process, so each change of server
starts from no workers.
"""

from __future__ import annotations

# Seconds to let a worker send what it holds before it is dropped: a stopped server never answers.
DRAIN_TIMEOUT_S = 10.0


def forget_prefect_workers() -> None:
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for service in (EventsWorker, APILogWorker):
        service.drain_all(timeout=DRAIN_TIMEOUT_S)
