"""The handle that the flow runs of one embedded run share: a stop flag and their open sessions.

`train_local` starts `collect` and `learn` as flow runs of their own in threads of its process. A
flow parameter must serialise (Prefect records it with the flow run, and a deployment would send it
over the network), so those flows receive the token's id, and find the token here: this module's
dict is the one process-wide lookup left, for the one value that crosses into another flow run.
Tasks get their session objects directly.

    token = StopToken()
    collect(params, token.id)  # in a thread; it attaches its session to the token while open
    token.open_sessions(CollectorSession)  # what a progress display reads
    token.set()  # the collectors and the learner stop after their current task run
    token.close()
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
import uuid
from typing import TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)

_tokens: dict[str, StopToken] = {}
_lock = threading.Lock()


class StopToken:
    """A process-local stop flag shared by the collectors and the learner of one run, and the
    sessions they have open (the run's progress display reads them)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.id = f"stop-{uuid.uuid4().hex[:10]}"
        self._sessions: list[object] = []
        with _lock:
            _tokens[self.id] = self

    def set(self) -> None:
        self.event.set()

    def close(self) -> None:
        with _lock:
            _tokens.pop(self.id, None)

    def attach(self, session: object) -> None:
        with _lock:
            self._sessions.append(session)

    def detach(self, session: object) -> None:
        with _lock:
            self._sessions = [s for s in self._sessions if s is not session]

    def open_sessions(self, kind: type[T]) -> list[T]:
        with _lock:
            return [s for s in self._sessions if isinstance(s, kind)]


def find_token(token_id: str | None) -> StopToken | None:
    """The open token with this id (None: no id, or its run has ended)."""
    if token_id is None:
        return None
    with _lock:
        return _tokens.get(token_id)


def should_stop(token_id: str | None, deadline: float | None) -> bool:
    if deadline is not None and time.monotonic() >= deadline:
        return True
    if token_id is None:
        return False
    token = find_token(token_id)
    return token is None or token.event.is_set()  # a closed token: the run that owned it has ended


# ----- SIGTERM and Ctrl-C ------------------------------------------------------------------------
_signalled: int | None = None


def signalled() -> int | None:
    """The signal (SIGTERM, SIGINT) that asked this process to stop, if any."""
    return _signalled


def stop_all() -> int:
    """Set every open token (every embedded run of this process stops); how many there were."""
    with _lock:
        tokens = list(_tokens.values())
    for token in tokens:
        token.set()
    return len(tokens)


def _on_signal(signum: int, frame: object) -> None:
    global _signalled
    if _signalled is not None:  # asked twice: the person (or scheduler) means now
        log.warning("%s again: exiting at once", signal.Signals(signum).name)
        logging.shutdown()
        os._exit(128 + _signalled)
    _signalled = signum
    if stop_all():
        log.warning(
            "%s: stopping; collectors flush their buffers, the learner checkpoints, runs are closed. "
            "Send it again to exit at once.",
            signal.Signals(signum).name,
        )
        return
    raise KeyboardInterrupt  # nothing cooperative is running: unwind (finally blocks close what is open)


def install_stop_signals() -> None:
    """SIGTERM and SIGINT stop every embedded run of this process cleanly (a second one exits at
    once); `signalled()` then tells the CLI to exit with 128 + the signal. During a flow run Prefect
    puts its own SIGTERM handler first (it fails the flow run, which closes its sessions) and hands
    the signal on to this one when the flow run has unwound."""
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
