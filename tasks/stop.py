"""Stop signals that flows can receive by id (an event cannot be a Prefect parameter)."""

from __future__ import annotations

import threading
import time

from tasks import sessions


class StopToken:
    """A process-local stop flag shared by the collectors and the learner of one run."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.id = sessions.register(self, "stop")

    def set(self) -> None:
        self.event.set()

    def close(self) -> None:
        sessions.close(self.id)


def should_stop(token_id: str | None, deadline: float | None) -> bool:
    if deadline is not None and time.monotonic() >= deadline:
        return True
    if token_id is None:
        return False
    try:
        return sessions.get(token_id, StopToken).event.is_set()
    except LookupError:
        return True  # the run that owned the token has ended
