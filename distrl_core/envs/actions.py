"""The canonical action language shared by every environment (SimDroid, ADB).

A policy emits one line of text; :func:`parse_action` turns any string into an :class:`Action`
(an explicit ``invalid`` action when the text is not a well-formed action, never an exception)
and :func:`format_action` writes the canonical text back. The text format::

    tap(3)                   tap the element with index 3 in the observation's element list
    tap(0.52,0.31)           tap a normalized point (x, y), both in [0, 1], origin top-left
    long_press(3)            long_press(0.5,0.5)
    swipe(up)                finger moves up (content scrolls down); up/down/left/right
    swipe(0.5,0.8,0.5,0.2)   finger moves from (x1, y1) to (x2, y2), normalized
    type("hello \\"you\\"")    JSON string literal, typed into the focused field
    key(BACK)                BACK, HOME or ENTER
    open_app("Settings")     an app's display name or package
    status(complete)         complete or impossible

What each kind accepts is checked in ``distrl_core.envs.action_rules``. Parsing tolerates
surrounding whitespace, case in names and keywords, an ``Action:`` prefix and a trailing ``.`` or
``;``. Normalized coordinates are rounded to 4 decimals (0.24 px on a 2400 px
screen) so that the text stays short and format/parse round-trip exactly.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from distrl_core.envs.action_rules import (
    DIRECTIONS,
    KEYCODES,
    MAX_TEXT_CHARS,
    STATUSES,
    ActionKind,
    Point,
    has_lone_surrogate,
    utf8_safe,
    validate_action,
)

__all__ = [
    "COORD_DECIMALS",
    "KEYCODES",
    "SWIPE_DIRECTION_POINTS",
    "Action",
    "ActionKind",
    "format_action",
    "has_lone_surrogate",
    "parse_action",
    "swipe_endpoints",
    "to_pixels",
]

COORD_DECIMALS = 4

# Finger start/end for direction swipes: long enough to scroll a list by about half a screen, and
# away from the edges where Android reserves gestures (notification shade, back swipe).
SWIPE_DIRECTION_POINTS: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {
    "up": ((0.5, 0.7), (0.5, 0.3)),
    "down": ((0.5, 0.3), (0.5, 0.7)),
    "left": ((0.8, 0.5), (0.2, 0.5)),
    "right": ((0.2, 0.5), (0.8, 0.5)),
}


def _round_point(point: Point) -> Point:
    x, y = point
    # "+ 0.0" turns -0.0 into 0.0 so the text never shows "-0.0".
    return (round(float(x), COORD_DECIMALS) + 0.0, round(float(y), COORD_DECIMALS) + 0.0)


@dataclass(frozen=True, slots=True)
class Action:
    """One agent action. Build with the classmethods (``Action.tap(3)``); fields by kind:

    - ``index``: element index for tap/long_press on an element.
    - ``point``: normalized (x, y) for tap/long_press on a point, swipe start.
    - ``end_point``: normalized swipe end; ``direction``: up/down/left/right instead of points.
    - ``text``: typed text (type), app name or package (open_app).
    - ``key``: BACK/HOME/ENTER; ``status``: complete/impossible.
    - ``raw`` and ``reason``: what was parsed and why it is not an action (invalid only).
    """

    kind: ActionKind
    index: int | None = None
    point: Point | None = None
    end_point: Point | None = None
    direction: str | None = None
    text: str | None = None
    key: str | None = None
    status: str | None = None
    raw: str | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        # Canonicalise first so equal actions compare equal after a format/parse round trip.
        object.__setattr__(self, "kind", ActionKind(self.kind))
        if self.point is not None:
            object.__setattr__(self, "point", _round_point(self.point))
        if self.end_point is not None:
            object.__setattr__(self, "end_point", _round_point(self.end_point))
        validate_action(self)

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def tap(cls, index: int | None = None, *, point: Point | None = None) -> Action:
        return cls(ActionKind.TAP, index=index, point=point)

    @classmethod
    def long_press(cls, index: int | None = None, *, point: Point | None = None) -> Action:
        return cls(ActionKind.LONG_PRESS, index=index, point=point)

    @classmethod
    def swipe(
        cls, direction: str | None = None, *, start: Point | None = None, end: Point | None = None
    ) -> Action:
        return cls(ActionKind.SWIPE, direction=direction, point=start, end_point=end)

    @classmethod
    def type_text(cls, text: str) -> Action:
        return cls(ActionKind.TYPE, text=text)

    @classmethod
    def press(cls, key: str) -> Action:
        return cls(ActionKind.KEY, key=key.upper())

    @classmethod
    def open_app(cls, app: str) -> Action:
        return cls(ActionKind.OPEN_APP, text=app)

    @classmethod
    def complete(cls) -> Action:
        return cls(ActionKind.STATUS, status="complete")

    @classmethod
    def impossible(cls) -> Action:
        return cls(ActionKind.STATUS, status="impossible")

    @classmethod
    def invalid(cls, raw: str, reason: str) -> Action:
        # Repaired so that the row it ends up in can still be written (Arrow strings are UTF-8).
        return cls(ActionKind.INVALID, raw=utf8_safe(raw), reason=utf8_safe(reason))

    @property
    def is_valid(self) -> bool:
        return self.kind is not ActionKind.INVALID

    @property
    def keycode(self) -> int | None:
        """Android keycode of a key action (BACK 4, HOME 3, ENTER 66), else None."""
        return KEYCODES.get(self.key) if self.key else None

    def __str__(self) -> str:
        return format_action(self)


# ------------------------------------------------------------------------------------------------
# Formatting


def _fmt_num(value: float) -> str:
    # repr of a rounded float is its shortest exact form ("0.52", "1.0"), which float() reads back.
    return repr(float(value))


def _fmt_point(point: Point) -> str:
    return f"{_fmt_num(point[0])},{_fmt_num(point[1])}"


def format_action(action: Action) -> str:
    """The canonical text of an action; ``parse_action(format_action(a)) == a`` for valid actions.

    An invalid action formats as ``invalid("<raw text>")`` for logs; that does not parse back to
    the same invalid action (its reason is lost), which is fine since nothing should replay it.
    """
    kind = action.kind
    if kind in (ActionKind.TAP, ActionKind.LONG_PRESS):
        if action.index is not None:
            return f"{kind.value}({action.index})"
        assert action.point is not None  # validated: a tap without an index has a point
        return f"{kind.value}({_fmt_point(action.point)})"
    if kind is ActionKind.SWIPE:
        if action.direction is not None:
            return f"swipe({action.direction})"
        start, end = swipe_endpoints(action)
        return f"swipe({_fmt_point(start)},{_fmt_point(end)})"
    if kind in (ActionKind.TYPE, ActionKind.OPEN_APP):
        return f"{kind.value}({json.dumps(action.text, ensure_ascii=False)})"
    if kind is ActionKind.KEY:
        return f"key({action.key})"
    if kind is ActionKind.STATUS:
        return f"status({action.status})"
    return f"invalid({json.dumps(action.raw, ensure_ascii=False)})"


# ------------------------------------------------------------------------------------------------
# Parsing

_CALL = re.compile(r"^([A-Za-z_]+)\s*\((.*)\)$", re.DOTALL)
_PREFIX = re.compile(r"^(?:action\s*:\s*)", re.IGNORECASE)
_INT = re.compile(r"^[+]?\d{1,9}$")
_NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")
_STRING = re.compile(r'^"((?:[^"\\]|\\.)*)"$', re.DOTALL)
_BARE_NAME = re.compile(r"^[\w .:/-]+$")
_NAMES = {k.value: k for k in ActionKind if k is not ActionKind.INVALID}


def _strip_wrapping(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == "`":
        text = text.strip("`").strip()
    text = _PREFIX.sub("", text, count=1).strip()
    if text.endswith((".", ";")):
        text = text[:-1].rstrip()
    return text


def _parse_numbers(args: str) -> list[float] | None:
    parts = [p.strip() for p in args.split(",")]
    if not all(_NUMBER.match(p) for p in parts):
        return None
    return [float(p) for p in parts]


def _parse_string_literal(args: str) -> str | None:
    match = _STRING.match(args.strip())
    if not match:
        return None
    try:
        value = json.loads(f'"{match.group(1)}"')
    except ValueError:  # a bad escape such as \x or a raw control character
        return None
    return value if isinstance(value, str) else None


def _parse_target(kind: ActionKind, args: str, raw: str) -> Action:
    """tap/long_press: one int (element index) or two numbers (normalized point)."""
    if _INT.match(args):
        return Action(kind, index=int(args))
    numbers = _parse_numbers(args)
    if numbers is None or len(numbers) != 2:
        return Action.invalid(raw, f"{kind.value} takes an element index or two coordinates x,y")
    if not all(0.0 <= v <= 1.0 for v in numbers):
        return Action.invalid(raw, f"{kind.value} coordinates must be normalized to [0, 1]")
    return Action(kind, point=(numbers[0], numbers[1]))


def _parse_swipe(args: str, raw: str) -> Action:
    word = args.lower()
    if word in DIRECTIONS:
        return Action.swipe(word)
    numbers = _parse_numbers(args)
    if numbers is None or len(numbers) != 4:
        return Action.invalid(raw, "swipe takes up/down/left/right or four coordinates x1,y1,x2,y2")
    if not all(0.0 <= v <= 1.0 for v in numbers):
        return Action.invalid(raw, "swipe coordinates must be normalized to [0, 1]")
    return Action.swipe(start=(numbers[0], numbers[1]), end=(numbers[2], numbers[3]))


def _parse_key(args: str, raw: str) -> Action:
    key = args.upper().removeprefix("KEYCODE_")
    if key in KEYCODES:
        return Action.press(key)
    return Action.invalid(raw, f"key must be one of {sorted(KEYCODES)}")


def _parse_status(args: str, raw: str) -> Action:
    status = args.lower()
    if status in STATUSES:
        return Action(ActionKind.STATUS, status=status)
    return Action.invalid(raw, f"status must be one of {STATUSES}")


def _parse_text(kind: ActionKind, args: str, raw: str) -> Action:
    """type/open_app: one double-quoted string (open_app also takes a bare app name)."""
    text = _parse_string_literal(args)
    if text is None and kind is ActionKind.OPEN_APP and _BARE_NAME.match(args):
        text = args  # models often drop the quotes around an app name; unambiguous here
    if text is None:
        return Action.invalid(raw, f'{kind.value} takes one double-quoted string, e.g. {kind.value}("abc")')
    if not text or len(text) > MAX_TEXT_CHARS:
        return Action.invalid(raw, f"{kind.value} text must have 1..{MAX_TEXT_CHARS} characters")
    if kind is ActionKind.OPEN_APP and not text.strip():
        return Action.invalid(raw, "open_app needs a non-blank app name")
    if has_lone_surrogate(text):
        return Action.invalid(raw, f"{kind.value} text contains a lone UTF-16 surrogate (half an emoji)")
    return Action(kind, text=text)


def _parse_call(name: str, args: str, raw: str) -> Action:
    kind = _NAMES.get(name.lower())
    if kind is None:
        return Action.invalid(raw, f"unknown action {name!r}; expected one of {sorted(_NAMES)}")
    args = args.strip()
    if kind in (ActionKind.TAP, ActionKind.LONG_PRESS):
        return _parse_target(kind, args, raw)
    if kind is ActionKind.SWIPE:
        return _parse_swipe(args, raw)
    if kind is ActionKind.KEY:
        return _parse_key(args, raw)
    if kind is ActionKind.STATUS:
        return _parse_status(args, raw)
    return _parse_text(kind, args, raw)


def parse_action(text: object) -> Action:
    """Parse a policy's output into an Action; anything malformed becomes an invalid Action."""
    if not isinstance(text, str):
        return Action.invalid(repr(text), f"expected a string, got {type(text).__name__}")
    try:
        body = _strip_wrapping(text)
        match = _CALL.match(body)
        if not match:
            return Action.invalid(text, "not of the form name(arguments)")
        return _parse_call(match.group(1), match.group(2), text)
    except Exception as exc:  # the contract is "never raises": report instead, tests watch for this
        return Action.invalid(text, f"internal parser error: {type(exc).__name__}: {exc}")


# ------------------------------------------------------------------------------------------------
# Geometry helpers shared by the environments


def to_pixels(point: Point, size: tuple[int, int]) -> tuple[int, int]:
    """Normalized (x, y) to integer pixels on a (width, height) screen, clamped onto the screen."""
    width, height = size
    x = min(width - 1, max(0, int(point[0] * width)))
    y = min(height - 1, max(0, int(point[1] * height)))
    return x, y


def swipe_endpoints(action: Action) -> tuple[Point, Point]:
    """Normalized start and end of a swipe action (direction swipes use SWIPE_DIRECTION_POINTS)."""
    if action.kind is not ActionKind.SWIPE:
        raise ValueError(f"swipe_endpoints needs a swipe action, got {action.kind}")
    if action.direction is not None:
        return SWIPE_DIRECTION_POINTS[action.direction]
    assert action.point is not None and action.end_point is not None  # validated on construction
    return action.point, action.end_point
