"""What makes an action well-formed: its kinds, the fields each kind takes, and their limits.

``Action`` (``distrl_core.envs.actions``) runs :func:`validate_action` on construction, so an Action
that exists is well-formed; the parser reports malformed text as an invalid Action instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from distrl_core.envs.actions import Action

__all__ = [
    "DIRECTIONS",
    "KEYCODES",
    "MAX_TEXT_CHARS",
    "STATUSES",
    "ActionKind",
    "Point",
    "check_point",
    "has_lone_surrogate",
    "utf8_safe",
    "validate_action",
]

MAX_TEXT_CHARS = 1000  # longer typed text is almost surely a runaway generation

KEYCODES: dict[str, int] = {"BACK": 4, "HOME": 3, "ENTER": 66}
STATUSES = ("complete", "impossible")
DIRECTIONS = ("up", "down", "left", "right")


def has_lone_surrogate(text: str) -> bool:
    """True when ``text`` holds half of a UTF-16 surrogate pair: it has no UTF-8 form, so neither a
    device nor a Parquet shard can take it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def utf8_safe(text: str) -> str:
    """``text`` with surrogate pairs joined and lone surrogates replaced by U+FFFD."""
    if not has_lone_surrogate(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class ActionKind(StrEnum):
    TAP = "tap"
    LONG_PRESS = "long_press"
    SWIPE = "swipe"
    TYPE = "type"
    KEY = "key"
    OPEN_APP = "open_app"
    STATUS = "status"
    INVALID = "invalid"


Point = tuple[float, float]


def check_point(point: Point, what: str) -> None:
    if len(point) != 2 or not all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in point):
        raise ValueError(f"{what} must be two normalized coordinates in [0, 1], got {point!r}")


_FIELDS = ("index", "point", "end_point", "direction", "text", "key", "status", "raw", "reason")
_ALLOWED: dict[ActionKind, frozenset[str]] = {
    ActionKind.TAP: frozenset({"index", "point"}),
    ActionKind.LONG_PRESS: frozenset({"index", "point"}),
    ActionKind.SWIPE: frozenset({"point", "end_point", "direction"}),
    ActionKind.TYPE: frozenset({"text"}),
    ActionKind.KEY: frozenset({"key"}),
    ActionKind.OPEN_APP: frozenset({"text"}),
    ActionKind.STATUS: frozenset({"status"}),
    ActionKind.INVALID: frozenset({"raw", "reason"}),
}


def _check_target(action: Action) -> None:
    kind = action.kind
    if (action.index is None) == (action.point is None):
        raise ValueError(f"{kind} needs exactly one of index= or point=")
    if action.index is not None and (isinstance(action.index, bool) or action.index < 0):
        raise ValueError(f"{kind} index must be an int >= 0, got {action.index!r}")
    if action.point is not None:
        check_point(action.point, f"{kind} point")


def _check_swipe(action: Action) -> None:
    if action.direction is not None:
        if action.point is not None or action.end_point is not None:
            raise ValueError("swipe takes either direction= or point= and end_point=, not both")
        if action.direction not in DIRECTIONS:
            raise ValueError(f"swipe direction must be one of {DIRECTIONS}, got {action.direction!r}")
        return
    if action.point is None or action.end_point is None:
        raise ValueError("swipe needs direction= or both point= and end_point=")
    check_point(action.point, "swipe start")
    check_point(action.end_point, "swipe end")


def _check_text(action: Action) -> None:
    kind, text = action.kind, action.text
    if not isinstance(text, str) or not text or len(text) > MAX_TEXT_CHARS:
        raise ValueError(f"{kind} needs text= of 1..{MAX_TEXT_CHARS} characters")
    if has_lone_surrogate(text):
        raise ValueError(f"{kind} text contains a lone UTF-16 surrogate; it has no UTF-8 form")
    if kind is ActionKind.OPEN_APP and not text.strip():
        raise ValueError("open_app needs a non-blank app name")


def _check_key(action: Action) -> None:
    if action.key not in KEYCODES:
        raise ValueError(f"key must be one of {sorted(KEYCODES)}, got {action.key!r}")


def _check_status(action: Action) -> None:
    if action.status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, got {action.status!r}")


def _check_invalid(action: Action) -> None:
    if action.raw is None or action.reason is None:
        raise ValueError("invalid action needs raw= (the text) and reason=")


_CHECKS: dict[ActionKind, Callable[[Action], None]] = {
    ActionKind.TAP: _check_target,
    ActionKind.LONG_PRESS: _check_target,
    ActionKind.SWIPE: _check_swipe,
    ActionKind.TYPE: _check_text,
    ActionKind.OPEN_APP: _check_text,
    ActionKind.KEY: _check_key,
    ActionKind.STATUS: _check_status,
    ActionKind.INVALID: _check_invalid,
}


def validate_action(action: Action) -> None:
    """Raise ValueError naming the problem unless ``action``'s fields fit its kind."""
    fields = {name: getattr(action, name) for name in _FIELDS}
    allowed = _ALLOWED[action.kind]
    extra = sorted(name for name, value in fields.items() if value is not None and name not in allowed)
    if extra:
        raise ValueError(f"{action.kind} action does not take {extra}; it takes only {sorted(allowed)}")
    _CHECKS[action.kind](action)
