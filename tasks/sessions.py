"""Process-local state that Prefect tasks refer to by id.

A collector's environments, policy and shard buffer, or a learner's replay and optimiser, cannot
travel through Prefect parameters or results (they are big, and not serialisable). A flow opens a
session, passes its id to its tasks, and closes it at the end; the tasks look the object up here.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any, TypeVar

T = TypeVar("T")

_sessions: dict[str, Any] = {}
_lock = threading.Lock()


def register(obj: Any, prefix: str) -> str:
    session_id = f"{prefix}-{uuid.uuid4().hex[:10]}"
    with _lock:
        _sessions[session_id] = obj
    return session_id


def get(session_id: str, kind: type[T]) -> T:
    with _lock:
        obj = _sessions.get(session_id)
    if not isinstance(obj, kind):
        raise LookupError(
            f"no {kind.__name__} session {session_id!r} in this process; sessions live in the flow run that "
            "opened them (tasks must run in the same process, e.g. with the default thread task runner)"
        )
    return obj


def close(session_id: str) -> Any:
    with _lock:
        return _sessions.pop(session_id, None)


def all_of(kind: type[T]) -> list[T]:
    """Every open session of one kind (for progress displays)."""
    with _lock:
        return [obj for obj in _sessions.values() if isinstance(obj, kind)]
