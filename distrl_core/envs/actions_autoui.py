"""AutoUI / DigiRL action text <-> canonical Action.

AutoUI checkpoints (and DigiRL, which fine-tunes them) emit::

    Action Plan: [DUAL_POINT,TYPE,...] ; Action Decision: "action_type": "DUAL_POINT",
    "touch_point": "[0.4, 0.5]", "lift_point": "[0.4, 0.5]", "typed_text": ""

Points are ``[y, x]`` normalized to [0, 1]. Whether a DUAL_POINT is a tap or a swipe follows the
Android-in-the-Wild rule (google-research/android_in_the_wild ``action_matching.is_tap_action``,
``_SWIPE_DISTANCE_THRESHOLD = 0.04``): a tap when the Euclidean distance between touch and lift, in
normalized (y, x) units, is at most 0.04, at the touch point; otherwise a swipe from touch to lift.
The [y, x] -> (x, y) swap and the action-type names follow DigiRL's ``autoui_translate_action``
(digirl/environment/android/autoui_utils.py). DigiRL spells the impossible status both
``TASK_IMPOSSIBLE`` and ``STATUS_TASK_IMPOSSIBLE``; both are accepted here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from distrl_core.envs.actions import Action, ActionKind, swipe_endpoints

__all__ = ["AUTOUI_TAP_DISTANCE", "format_autoui_action", "parse_autoui_action"]

AUTOUI_TAP_DISTANCE = 0.04

_DECISION = re.compile(r"action\s*decision\s*:", re.IGNORECASE)
_TYPE = re.compile(r'"?action_type"?\s*:\s*"?([A-Za-z_]+)"?', re.IGNORECASE)
_POINT_TEMPLATE = r'"?{name}"?\s*:\s*"?\[\s*([^\],]*?)\s*,\s*([^\],]*?)\s*\]"?'
_TOUCH = re.compile(_POINT_TEMPLATE.format(name="touch_point"), re.IGNORECASE)
_LIFT = re.compile(_POINT_TEMPLATE.format(name="lift_point"), re.IGNORECASE)
# typed_text is the last field; its value runs to the last quote so inner quotes survive.
_TYPED = re.compile(r'"?typed_text"?\s*:\s*"(.*)"', re.IGNORECASE | re.DOTALL)

_SIMPLE = {
    "PRESS_BACK": Action.press("BACK"),
    "PRESS_HOME": Action.press("HOME"),
    "PRESS_ENTER": Action.press("ENTER"),
    "STATUS_TASK_COMPLETE": Action.complete(),
    "STATUS_TASK_IMPOSSIBLE": Action.impossible(),
    "TASK_COMPLETE": Action.complete(),
    "TASK_IMPOSSIBLE": Action.impossible(),
}


def _read_yx(regex: re.Pattern[str], text: str) -> tuple[float, float] | None:
    match = regex.search(text)
    if not match:
        return None
    try:
        y, x = float(match.group(1)), float(match.group(2))
    except ValueError:
        return None
    if not (math.isfinite(y) and math.isfinite(x)):
        return None
    return y, x


def _dual_point(text: str, raw: str) -> Action:
    touch = _read_yx(_TOUCH, text)
    lift = _read_yx(_LIFT, text)
    if touch is None or lift is None:
        return Action.invalid(raw, 'DUAL_POINT needs "touch_point": "[y, x]" and "lift_point": "[y, x]"')
    if not all(0.0 <= v <= 1.0 for v in (*touch, *lift)):
        return Action.invalid(raw, "DUAL_POINT coordinates must be normalized to [0, 1]")
    if math.dist(touch, lift) <= AUTOUI_TAP_DISTANCE:
        return Action.tap(point=(touch[1], touch[0]))
    return Action.swipe(start=(touch[1], touch[0]), end=(lift[1], lift[0]))


def parse_autoui_action(text: object) -> Action:
    """Parse AutoUI/DigiRL output; anything malformed becomes an invalid Action, never an exception."""
    if not isinstance(text, str):
        return Action.invalid(repr(text), f"expected a string, got {type(text).__name__}")
    try:
        decision = _DECISION.split(text)
        body = decision[-1]  # the plan before "Action Decision:" may itself name action types
        type_match = _TYPE.search(body)
        if not type_match:
            return Action.invalid(text, 'no "action_type" found in AutoUI output')
        action_type = type_match.group(1).upper()
        if action_type == "DUAL_POINT":
            return _dual_point(body, text)
        if action_type == "TYPE":
            typed = _TYPED.search(body)
            if not typed or not typed.group(1).strip():
                return Action.invalid(text, 'TYPE needs a non-empty "typed_text"')
            return Action.type_text(typed.group(1))
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
        return _autoui("TYPE", text=action.text or "")
    if kind is ActionKind.KEY:
        return _autoui(f"PRESS_{action.key}")
    if kind is ActionKind.STATUS:
        return _autoui("STATUS_TASK_COMPLETE" if action.status == "complete" else "STATUS_TASK_IMPOSSIBLE")
    raise ValueError(f"AutoUI has no equivalent of a {kind} action")
