"""AutoUI/DigiRL output parsing: [y, x] points, the 0.04 tap-vs-swipe rule, and no exceptions."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distrl_core.envs.actions import Action, ActionKind
from distrl_core.envs.actions_autoui import AUTOUI_TAP_DISTANCE, format_autoui_action, parse_autoui_action


def autoui(action_type: str, touch: str = "-1.0, -1.0", lift: str = "-1.0, -1.0", text: str = "") -> str:
    return (
        f'Action Plan: [{action_type},STATUS_TASK_COMPLETE] ; Action Decision: "action_type": "{action_type}", '
        f'"touch_point": "[{touch}]", "lift_point": "[{lift}]", "typed_text": "{text}"'
    )


def test_dual_point_with_equal_points_is_a_tap_at_x_y() -> None:
    # AutoUI points are [y, x]: y=0.4 (row), x=0.7 (column)
    action = parse_autoui_action(autoui("DUAL_POINT", "0.4, 0.7", "0.4, 0.7"))
    assert action == Action.tap(point=(0.7, 0.4))


def test_tap_vs_swipe_threshold_is_euclidean_in_normalized_units() -> None:
    inside = parse_autoui_action(autoui("DUAL_POINT", "0.5, 0.5", "0.53, 0.52"))  # dist 0.036
    assert inside == Action.tap(point=(0.5, 0.5))
    outside = parse_autoui_action(autoui("DUAL_POINT", "0.5, 0.5", "0.53, 0.53"))  # dist 0.042
    assert outside.kind is ActionKind.SWIPE
    assert outside == Action.swipe(start=(0.5, 0.5), end=(0.53, 0.53))
    scroll = parse_autoui_action(autoui("DUAL_POINT", "0.8, 0.5", "0.2, 0.5"))
    assert scroll == Action.swipe(start=(0.5, 0.8), end=(0.5, 0.2))


@pytest.mark.parametrize(
    ("action_type", "expected"),
    [
        ("PRESS_BACK", Action.press("BACK")),
        ("PRESS_HOME", Action.press("HOME")),
        ("PRESS_ENTER", Action.press("ENTER")),
        ("STATUS_TASK_COMPLETE", Action.complete()),
        ("STATUS_TASK_IMPOSSIBLE", Action.impossible()),
        ("TASK_IMPOSSIBLE", Action.impossible()),
    ],
)
def test_simple_action_types(action_type: str, expected: Action) -> None:
    assert parse_autoui_action(autoui(action_type)) == expected


def test_type_keeps_inner_quotes_and_spaces() -> None:
    assert parse_autoui_action(autoui("TYPE", text="best buy")) == Action.type_text("best buy")
    assert parse_autoui_action(autoui("TYPE", text='12" tv')) == Action.type_text('12" tv')


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Action Decision: nothing here",
        autoui("TYPE", text=""),
        autoui("DUAL_POINT"),  # the -1 placeholders are not on screen
        autoui("DUAL_POINT", "0.5, abc", "0.5, 0.5"),
        autoui("DUAL_POINT", "0.5, 1.5", "0.5, 0.5"),
        autoui("SCROLL_SIDEWAYS"),
        'Action Decision: "action_type": "DUAL_POINT", "touch_point": "[0.5, 0.5]"',
    ],
)
def test_malformed_autoui_output_is_invalid(text: str) -> None:
    action = parse_autoui_action(text)
    assert not action.is_valid
    assert action.raw == text
    assert "internal parser error" not in (action.reason or "")


def test_plan_before_decision_does_not_leak_into_the_action() -> None:
    text = (
        'Action Plan: "action_type": "PRESS_HOME" ; Action Decision: "action_type": "PRESS_BACK", '
        '"touch_point": "[-1.0, -1.0]", "lift_point": "[-1.0, -1.0]", "typed_text": ""'
    )
    assert parse_autoui_action(text) == Action.press("BACK")


coords = st.floats(min_value=0.0, max_value=1.0, allow_nan=False).map(lambda v: round(v, 4))


@settings(max_examples=500)
@given(coords, coords, coords, coords)
def test_autoui_format_and_parse_agree(y1: float, x1: float, y2: float, x2: float) -> None:
    swipe_or_tap = parse_autoui_action(autoui("DUAL_POINT", f"{y1}, {x1}", f"{y2}, {x2}"))
    assert swipe_or_tap.is_valid
    far = ((y1 - y2) ** 2 + (x1 - x2) ** 2) ** 0.5 > AUTOUI_TAP_DISTANCE
    assert (swipe_or_tap.kind is ActionKind.SWIPE) == far
    again = parse_autoui_action("Action Decision: " + format_autoui_action(swipe_or_tap))
    assert again == swipe_or_tap


def test_format_needs_a_resolver_for_index_taps() -> None:
    with pytest.raises(ValueError, match="element_center"):
        format_autoui_action(Action.tap(2))
    text = format_autoui_action(Action.tap(2), element_center=lambda i: (0.25, 0.75))
    assert parse_autoui_action(text) == Action.tap(point=(0.25, 0.75))
    with pytest.raises(ValueError, match="no equivalent"):
        format_autoui_action(Action.open_app("Clock"))


_fragments = st.sampled_from(
    [
        "Action Decision:", "Action Plan:", '"action_type"', ": ", '"DUAL_POINT"', '"TYPE"', '"PRESS_BACK"',
        '"touch_point"', '"lift_point"', '"typed_text"', '"[0.5, 0.5]"', "[", "]", ",", '"', "-1.0", "nan",
        "1e309", " ", "\\", "\n",
    ]
)  # fmt: skip


@settings(max_examples=3000, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=120), st.lists(_fragments, max_size=16).map("".join)))
def test_random_and_near_miss_autoui_strings_never_raise(text: str) -> None:
    action = parse_autoui_action(text)
    assert isinstance(action, Action)
    if not action.is_valid:
        assert "internal parser error" not in (action.reason or "")
