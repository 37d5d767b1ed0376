"""How a flow's child process lives: it dies with its parent, and its threads run at a niceness.

Used by the embedded evaluator child of `train_local` and by the servers `distrl up` starts
(`ops.processes`).
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading

__all__ = ["die_with_parent", "lower_thread_priority"]

_PR_SET_PDEATHSIG = 1


def die_with_parent(signum: int = signal.SIGTERM) -> None:
    """`preexec_fn` of a child server: the kernel sends it `signum` when its parent dies, even by
    kill -9 (Linux; elsewhere a no-op), so no server outlives the process that needs it. SIGKILL
    for a child whose SIGTERM handling would first talk to servers that are dying with the parent.

    Runs in the child between fork and exec: no locks, no logging."""
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os.kill(os.getpid(), signum)


def lower_thread_priority(nice: int) -> None:
    """Make the calling thread at least `nice` nice (Linux schedules threads one by one, and the
    threads it starts later inherit it); elsewhere, or where not allowed, nothing changes."""
    if nice <= 0:
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, max(nice, os.getpriority(os.PRIO_PROCESS, tid)))
    except (AttributeError, OSError):
        return
