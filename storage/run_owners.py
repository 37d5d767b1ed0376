"""Which process owns an MLflow run, so that runs left RUNNING by a killed process are closed.

A run is tagged with its host, pid and the pid's start time when it starts; a process that dies
without ending its runs (kill -9, a power cut) leaves them RUNNING forever. The next start on the
same host marks every RUNNING run whose owner is gone as FAILED (the pid's start time tells a
reused pid from the owner). Runs of other hosts are left alone: their owners cannot be checked here.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

import psutil

log = logging.getLogger(__name__)

HOST_TAG, PID_TAG, STARTED_TAG = "distrl.host", "distrl.pid", "distrl.pid_started"
_FIND_RUNNING = "attributes.status = 'RUNNING' AND tags.`distrl.host` = '{host}'"


def _started(pid: int) -> str | None:
    try:
        return f"{psutil.Process(pid).create_time():.2f}"
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def owner_tags() -> dict[str, str]:
    """Tags naming this process as a run's owner."""
    return {
        HOST_TAG: socket.gethostname(),
        PID_TAG: str(os.getpid()),
        STARTED_TAG: _started(os.getpid()) or "",
    }


def fail_orphaned_runs(client: Any, experiment_id: str) -> list[str]:
    """Mark this host's RUNNING runs whose owner process is gone as FAILED; returns their ids."""
    host = socket.gethostname().replace("'", "")
    runs = client.search_runs(
        [experiment_id], filter_string=_FIND_RUNNING.format(host=host), max_results=1000
    )
    failed = []
    for run in runs:
        tags = run.data.tags
        try:
            pid = int(tags.get(PID_TAG, ""))
        except ValueError:
            continue
        if _started(pid) is not None and _started(pid) == tags.get(STARTED_TAG):
            continue  # the owner is alive
        client.set_tag(run.info.run_id, "distrl.failed_because", f"owner process {pid} on {host} died")
        client.set_terminated(run.info.run_id, status="FAILED")
        failed.append(run.info.run_id)
    if failed:
        log.warning(
            "marked %d MLflow run(s) FAILED: left RUNNING by a process of this host that died (%s)",
            len(failed), ", ".join(failed),
        )  # fmt: skip
    return failed
