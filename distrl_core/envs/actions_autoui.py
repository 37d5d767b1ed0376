"""AutoUI / DigiRL action text <-> canonical Action.

AutoUI checkpoints (and DigiRL, which fine-tunes them) emit::

    Action Plan: [DUAL_POINT,TYPE,...] ; Action Decision: "action_type": "DUAL_POINT",
    "touch_point": "[0.4, 0.5]", "lift_point": "[0.4, 0.5]", "typed_text": ""

Points are ``[y, x]`` normalized to [0, 1]. Whether a DUAL_POINT is a tap or a swipe follows the
Android-in-the-Wild rule (google-research/android_in_the_wild ``action_matching.is_tap_action``,
``_SWIPE_DISTANCE_THRESHOLD = 0.04``): a tap when the Euclidean distance between touch and lift, in
normalized (y, x) units, is at most 0.04, at the touch point; otherwise a swipe from touch to lift.
The distance is compared exactly on the 4-decimal grid every Action is stored at (float arithmetic
decides exact-0.04 distances both ways depending on where they lie on the screen).
The [y, x] -> (x, y) swap and the action-type names follow DigiRL's ``autoui_translate_action``
(digirl/environment/android/autoui_utils.py). DigiRL spells the impossible status
``TASK_IMPOSSIBLE``; AutoUI's ``STATUS_TASK_IMPOSSIBLE`` (and ``TASK_COMPLETE``) are accepted too.

Fields may come in any order. ``typed_text`` is read first, as a JSON-style string (``\\"`` is a quote,
``\\\\`` a backslash, ``\\n`` a newline, ``\\uXXXX`` a code point), and the other fields are looked for
outside it, so typed text that itself reads like a field or a decision cannot change the action.
AutoUI's own training data does not escape quotes, so an unescaped quote ends the text only where a
field could end: before the end of the output, or before ``,``/``;``/``}`` and then the end or
another field's key or a repeated ``Action Decision:``/``Action Plan:`` (a model that repeats
itself); failing that, at the last quote. When the output holds more than one decision, the first
wins: only the fields between the first ``Action Decision:`` and the next decision or plan count. The parser is a left-to-right scan (no
backtracking regex), so its time is linear in the length of the model output, whatever the output.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable

from distrl_core.envs.action_rules import MAX_TEXT_CHARS
from distrl_core.envs.actions import (
    COORD_DECIMALS,
    Action,
    ActionKind,
    has_lone_surrogate,
    swipe_endpoints,
)

__all__ = ["AUTOUI_TAP_DISTANCE", "format_autoui_action", "is_tap", "parse_autoui_action"]

AUTOUI_TAP_DISTANCE = 0.04
_GRID: int = 10**COORD_DECIMALS
_TAP_DISTANCE_UNITS = round(AUTOUI_TAP_DISTANCE * _GRID)  # 400 grid units

# Neither pattern has nested or overlapping quantifiers: each whitespace run is crossed once.
_DECISION = re.compile(r"action\s*decision\s*:", re.IGNORECASE)
# Where a repeated output starts again: a next decision, or a next plan (which a decision follows).
_REPEAT = re.compile(r"action\s*(?:decision|plan)\s*:", re.IGNORECASE)
_KEY = re.compile(r'"?(action_type|touch_point|lift_point|typed_text)"?\s*:', re.IGNORECASE)
_TYPED_TEXT_KEY = re.compile(r'"?typed_text"?\s*:', re.IGNORECASE)
# What may stand before a key that starts a field (besides the start of the text); ":" ends "Action Decision:".
_FIELD_SEPARATORS = ",{;(:"
# What may follow the closing quote of a field's value, before the next key or the end.
_VALUE_TERMINATORS = ",;}"
_JSON_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX = frozenset("0123456789abcdefABCDEF")

_SIMPLE = {
    "PRESS_BACK": Action.press("BACK"),
    "PRESS_HOME": Action.press("HOME"),
    "PRESS_ENTER": Action.press("ENTER"),
    "STATUS_TASK_COMPLETE": Action.complete(),
    "STATUS_TASK_IMPOSSIBLE": Action.impossible(),
    "TASK_COMPLETE": Action.complete(),
    "TASK_IMPOSSIBLE": Action.impossible(),
}


def _starts_field(body: str, start: int) -> bool:
    i = start - 1
    while i >= 0 and body[i].isspace():
        i -= 1
    return i < 0 or body[i] in _FIELD_SEPARATORS


def _fields(body: str) -> dict[str, str]:
    """The raw value text of each field, cut at the next field's key: order does not matter."""
    starts: dict[str, tuple[int, int]] = {}  # name -> (key start, value start)
    loose: dict[str, tuple[int, int]] = {}  # keys without a separator before them, as a fallback
    for match in _KEY.finditer(body):
        name = match.group(1).lower()
        target = starts if _starts_field(body, match.start()) else loose
        target.setdefault(name, (match.start(), match.end()))
    for name, span in loose.items():
        starts.setdefault(name, span)
    ordered = sorted(starts.items(), key=lambda item: item[1][0])
    values: dict[str, str] = {}
    for i, (name, (_, value_start)) in enumerate(ordered):
        end = ordered[i + 1][1][0] if i + 1 < len(ordered) else len(body)
        value = body[value_start:end].rstrip()
        if i + 1 < len(ordered) and value.endswith(","):
            value = value[:-1]  # the separator before the next field
        values[name] = value.strip()
    return values


def _unquote_word(value: str) -> str:
    value = value.removeprefix('"').lstrip()
    end = 0
    while end < len(value) and (value[end].isascii() and (value[end].isalpha() or value[end] == "_")):
        end += 1
    return value[:end].upper()


def _read_yx(value: str | None) -> tuple[float, float] | None:
    if value is None:
        return None
    value = value.removeprefix('"').lstrip()
    close = value.find("]")
    if not value.startswith("[") or close < 0:
        return None
    parts = value[1:close].split(",")
    if len(parts) != 2:
        return None
    try:
        y, x = float(parts[0]), float(parts[1])
    except ValueError:
        return None
    if not (math.isfinite(y) and math.isfinite(x)):
        return None
    return y, x


def _grid(value: float) -> int:
    return round(round(value, COORD_DECIMALS) * _GRID)


def is_tap(touch_yx: tuple[float, float], lift_yx: tuple[float, float]) -> bool:
    """AitW's ``is_tap_action``: touch-to-lift distance <= 0.04 in normalized units.

    Decided in integers on the 4-decimal grid an Action is stored at, so that a distance of exactly
    0.04 is a tap everywhere on the screen (float64 ``math.dist`` calls [0.10,0.10]->[0.14,0.10] a
    swipe but [0.90,0.30]->[0.94,0.30] a tap).
    """
    dy = _grid(touch_yx[0]) - _grid(lift_yx[0])
    dx = _grid(touch_yx[1]) - _grid(lift_yx[1])
    return bool(dy * dy + dx * dx <= _TAP_DISTANCE_UNITS * _TAP_DISTANCE_UNITS)


def _dual_point(fields: dict[str, str], raw: str) -> Action:
    touch = _read_yx(fields.get("touch_point"))
    lift = _read_yx(fields.get("lift_point"))
    if touch is None or lift is None:
        return Action.invalid(raw, 'DUAL_POINT needs "touch_point": "[y, x]" and "lift_point": "[y, x]"')
    if not all(0.0 <= v <= 1.0 for v in (*touch, *lift)):
        return Action.invalid(raw, "DUAL_POINT coordinates must be normalized to [0, 1]")
    if is_tap(touch, lift):
        return Action.tap(point=(touch[1], touch[0]))
    return Action.swipe(start=(touch[1], touch[0]), end=(lift[1], lift[0]))


def _ends_value(text: str, index: int) -> bool:
    """Whether a quote just before ``index`` can close a field's value: the end of the output
    follows, or a repeated decision or plan (after a terminator or not), or a terminator and then
    the end or another field's key."""
    index = _skip_space(text, index)
    if index == len(text) or _REPEAT.match(text, index) is not None:
        return True
    if text[index] not in _VALUE_TERMINATORS:
        return False
    index = _skip_space(text, index + 1)
    return index == len(text) or _KEY.match(text, index) is not None or _REPEAT.match(text, index) is not None


def _skip_space(text: str, index: int) -> int:
    while index < len(text) and text[index].isspace():
        index += 1
    return index


def _read_string(text: str, index: int) -> tuple[str, int, int] | None:
    """The JSON-style string at ``index`` (after spaces): (decoded text, opening quote, index after
    the closing quote), or None when no quoted string is there."""
    index = _skip_space(text, index)
    if index >= len(text) or text[index] != '"':
        return None
    opening, index = index, index + 1
    decoded: list[str] = []
    last_quote: tuple[int, int] | None = None  # (index, decoded length) of the last unescaped quote
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            escape = text[index + 1]
            hex_digits = text[index + 2 : index + 6]
            if escape in _JSON_ESCAPES:
                decoded.append(_JSON_ESCAPES[escape])
                index += 2
            elif escape == "u" and len(hex_digits) == 4 and set(hex_digits) <= _HEX:
                decoded.append(chr(int(hex_digits, 16)))
                index += 6
            else:  # not an escape JSON knows: the backslash is text (a model that never escapes)
                decoded.append(char)
                index += 1
            continue
        if char == '"':
            if _ends_value(text, index + 1):
                return _join(decoded), opening, index + 1
            last_quote = (index, len(decoded))
        decoded.append(char)
        index += 1
    if last_quote is None:
        return None
    return _join(decoded[: last_quote[1]]), opening, last_quote[0] + 1


def _join(chars: list[str]) -> str:
    text = "".join(chars)
    try:  # a \uD83D\uDE00 escape pair is one emoji
        return text.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeDecodeError:  # a lone surrogate stays, for _type to refuse with its reason
        return text


def _typed_text(text: str) -> tuple[str | None, str, int]:
    """The typed text (None when there is no quoted ``typed_text`` value), the output with that
    value emptied, so nothing inside the text is read as a field, and where its key starts (-1)."""
    key = None
    for match in _TYPED_TEXT_KEY.finditer(text):
        if _starts_field(text, match.start()):
            key = match
            break
        key = key or match
    if key is None:
        return None, text, -1
    read = _read_string(text, key.end())
    if read is None:
        return None, text, -1
    value, opening, after = read
    return value, text[:opening] + '""' + text[after:], key.start()


def _first_decision(text: str) -> tuple[int, int]:
    """Where the fields of the first decision lie: from after the first ``Action Decision:`` to the
    next decision or plan (a model that repeats itself); the whole output when it names no decision."""
    decision = _DECISION.search(text)
    if decision is None:
        return 0, len(text)
    following = _REPEAT.search(text, decision.end())
    return decision.end(), following.start() if following else len(text)


def _type(typed: str | None, raw: str) -> Action:
    if typed is None:
        return Action.invalid(raw, 'TYPE needs "typed_text": "<text>"')
    text = typed
    if not text:
        return Action.invalid(raw, 'TYPE needs a non-empty "typed_text"')
    if len(text) > MAX_TEXT_CHARS:
        return Action.invalid(
            raw,
            f"TYPE text has {len(text)} characters; at most {MAX_TEXT_CHARS} are typed (a runaway output?)",
        )
    if has_lone_surrogate(text):
        return Action.invalid(
            raw, "TYPE text contains a lone UTF-16 surrogate (half an emoji); it cannot be typed"
        )
    return Action.type_text(text)


def parse_autoui_action(text: object) -> Action:
    """Parse AutoUI/DigiRL output; anything malformed becomes an invalid Action, never an exception."""
    if not isinstance(text, str):
        return Action.invalid(repr(text), f"expected a string, got {type(text).__name__}")
    try:
        typed, rest, typed_key = _typed_text(text)
        # The plan before "Action Decision:" may name action types; a repeated decision is not read.
        start, end = _first_decision(rest)
        if typed is not None and not start <= typed_key < end:
            typed = None  # typed text of a later decision, or of the plan
        fields = _fields(rest[start:end])
        action_type = _unquote_word(fields.get("action_type", ""))
        if not action_type:
            return Action.invalid(text, 'no "action_type" found in AutoUI output')
        if action_type == "DUAL_POINT":
            return _dual_point(fields, text)
        if action_type == "TYPE":
            return _type(typed, text)
        if action_type in _SIMPLE:
            return _SIMPLE[action_type]
        return Action.invalid(text, f"unknown AutoUI action_type {action_type!r}")
    except Exception as exc:  # "never raises" is the contract; the fuzz tests watch for this reason
        return Action.invalid(text, f"internal parser error: {type(exc).__name__}: {exc}")


def _autoui(action_type: str, touch: str = "-1.0, -1.0", lift: str = "-1.0, -1.0", text: str = "") -> str:
    return (
        f'"action_type": "{action_type}", "touch_point": "[{touch}]", '
        f'"lift_point": "[{lift}]", "typed_text": "{text}"'
    )


def format_autoui_action(
    action: Action, element_center: Callable[[int], tuple[float, float]] | None = None
) -> str:
    """AutoUI text of an action, e.g. for the "Previous Actions" of an AutoUI prompt.

    ``element_center(index) -> (x, y)`` normalized resolves element-index taps; AutoUI has no
    long-press or open-app, so those (and index taps without a resolver) raise ValueError.
    """

    def yx(point: tuple[float, float]) -> str:
        return f"{point[1]:.4f}, {point[0]:.4f}"

    kind = action.kind
    if kind is ActionKind.TAP:
        if action.point is not None:
            point = action.point
        elif element_center is not None and action.index is not None:
            point = element_center(action.index)
        else:
            raise ValueError("an element-index tap needs element_center to become an AutoUI point")
        return _autoui("DUAL_POINT", yx(point), yx(point))
    if kind is ActionKind.SWIPE:
        start, end = swipe_endpoints(action)
        return _autoui("DUAL_POINT", yx(start), yx(end))
    if kind is ActionKind.TYPE:
        # Escaped JSON-style, so any text (quotes, backslashes, field-like pieces) reads back as itself.
        return _autoui("TYPE", text=json.dumps(action.text or "", ensure_ascii=False)[1:-1])
    if kind is ActionKind.KEY:
        return _autoui(f"PRESS_{action.key}")
    if kind is ActionKind.STATUS:
        return _autoui("STATUS_TASK_COMPLETE" if action.status == "complete" else "STATUS_TASK_IMPOSSIBLE")
    raise ValueError(f"AutoUI has no equivalent of a {kind} action")
