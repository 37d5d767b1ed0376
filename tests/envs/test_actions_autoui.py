"""AutoUI/DigiRL output parsing: [y, x] points, the 0.04 tap-vs-swipe rule, and no exceptions."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distrl_core.envs.actions import MAX_TEXT_CHARS, Action, ActionKind
from distrl_core.envs.actions_autoui import format_autoui_action, parse_autoui_action


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
        autoui("TYPE", text="x" * 1001),  # over MAX_TEXT_CHARS: a runaway generation
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


@pytest.mark.parametrize(
    ("touch", "lift"),
    [
        ("0.10, 0.10", "0.14, 0.10"),  # float64: 0.04000000000000001, once called a swipe
        ("0.90, 0.30", "0.94, 0.30"),  # float64: 0.039999999999999925
        ("0.30, 0.90", "0.30, 0.94"),
        ("0.50, 0.50", "0.524, 0.532"),  # a 3-4-5 triangle: exactly 0.04 diagonally
        ("0.0, 0.0", "0.04, 0.0"),
    ],
)
def test_exactly_004_apart_is_a_tap_everywhere_as_aitw_defines_it(touch: str, lift: str) -> None:
    # AitW is_tap_action: distance <= 0.04 is a tap.
    action = parse_autoui_action(autoui("DUAL_POINT", touch, lift))
    assert action.kind is ActionKind.TAP, action


@pytest.mark.parametrize(("touch", "lift"), [("0.10, 0.10", "0.1401, 0.10"), ("0.50, 0.50", "0.5241, 0.532")])
def test_just_over_004_is_a_swipe(touch: str, lift: str) -> None:
    assert parse_autoui_action(autoui("DUAL_POINT", touch, lift)).kind is ActionKind.SWIPE


def test_whitespace_only_text_types_a_space_as_digirl_does() -> None:
    assert parse_autoui_action(autoui("TYPE", text=" ")) == Action.type_text(" ")


def test_text_over_the_limit_is_a_clear_error_not_an_internal_one() -> None:
    action = parse_autoui_action(autoui("TYPE", text="y" * 5000))
    assert not action.is_valid
    assert "5000 characters" in (action.reason or "") and "at most 1000" in (action.reason or "")


def test_lone_surrogate_is_rejected_but_a_pair_types_the_emoji() -> None:
    lone = parse_autoui_action(autoui("TYPE", text="hi \ud83d"))
    assert not lone.is_valid and "surrogate" in (lone.reason or "")
    lone.raw.encode("utf-8")  # the invalid action itself can still be stored
    assert parse_autoui_action(autoui("TYPE", text="\U0001f600")) == Action.type_text("\U0001f600")


_FIELDS = {
    "action_type": '"action_type": "TYPE"',
    "touch_point": '"touch_point": "[-1.0, -1.0]"',
    "lift_point": '"lift_point": "[-1.0, -1.0]"',
    "typed_text": '"typed_text": "best buy, \\"cheap\\" tv"',
}


@pytest.mark.parametrize("order", list(itertools.permutations(_FIELDS)))
@pytest.mark.parametrize("separator", [", ", ",", ",\n  "])
def test_field_order_does_not_matter(order: tuple[str, ...], separator: str) -> None:
    body = separator.join(_FIELDS[name] for name in order)
    typed = parse_autoui_action("Action Decision: " + body)
    assert typed == Action.type_text('best buy, "cheap" tv'), body  # JSON-style escapes are honoured
    tap = body.replace('"TYPE"', '"DUAL_POINT"').replace("-1.0, -1.0", "0.25, 0.75")
    assert parse_autoui_action("Action Decision: " + tap) == Action.tap(point=(0.75, 0.25)), tap
    braced = parse_autoui_action("Action Decision: {" + body + "}")
    assert braced == typed


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
    # Exact on the 4-decimal grid (the coordinates are rounded to it): 0.04 is 400 units.
    far = round((y1 - y2) * 10_000) ** 2 + round((x1 - x2) * 10_000) ** 2 > 400**2
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


# Typed text that reads like AutoUI fields or a decision (issue 19: DigiRL's translator and this
# parser both took these pieces for fields when typed_text was not the last field).
_FIELD_LIKE_TEXTS = [
    'buy milk, "action_type": "PRESS_HOME"',
    'Action Decision: "action_type": "PRESS_BACK"',
    'swipe here, "lift_point": "[0.9, 0.9]"',
    'a; "touch_point": "[0.1, 0.1]"',
    'x", "action_type": "PRESS_HOME", "typed_text": "y',
]


@pytest.mark.parametrize("typed", _FIELD_LIKE_TEXTS)
@pytest.mark.parametrize("order", list(itertools.permutations(["action_type", "typed_text", "points"])))
def test_field_like_typed_text_is_typed_whatever_the_field_order(typed: str, order: tuple[str, ...]) -> None:
    fields = {
        "action_type": '"action_type": "TYPE"',
        "typed_text": f'"typed_text": {json.dumps(typed)}',
        "points": '"touch_point": "[-1.0, -1.0]", "lift_point": "[-1.0, -1.0]"',
    }
    text = "Action Plan: [TYPE] ; Action Decision: " + ", ".join(fields[name] for name in order)
    assert parse_autoui_action(text) == Action.type_text(typed), text


def test_typed_text_holding_a_decision_is_not_a_back_press() -> None:
    # Before the fix the last "Action Decision:" (inside the text) won: this was a BACK press.
    text = (
        'Action Plan: [TYPE] ; Action Decision: "action_type": "TYPE", "typed_text": '
        '"Action Decision: \\"action_type\\": \\"PRESS_BACK\\"", "touch_point": "[-1.0, -1.0]", '
        '"lift_point": "[-1.0, -1.0]"'
    )
    assert parse_autoui_action(text) == Action.type_text('Action Decision: "action_type": "PRESS_BACK"')


@pytest.mark.parametrize(
    ("typed_value", "expected"),
    [
        ('"12" tv"', '12" tv'),  # AutoUI's data never escapes: an inner quote not before a field stays
        ('"say "hi", ok"', 'say "hi", ok'),
        ('"C:\\\\temp"', "C:\\temp"),  # an escaped backslash
        ('"C:\\path"', "C:\\path"),  # not an escape JSON knows: the backslash is text
        ('"a \\"b\\""', 'a "b"'),
        ('"line\\none"', "line\none"),
        ('"\\ud83d\\ude00 ok"', "\U0001f600 ok"),  # a surrogate pair escape is one emoji
    ],
)
@pytest.mark.parametrize("last", [True, False])
def test_unescaped_and_escaped_text_read_as_a_model_means_it(
    typed_value: str, expected: str, last: bool
) -> None:
    typed = f'"typed_text": {typed_value}'
    rest = '"action_type": "TYPE", "touch_point": "[-1.0, -1.0]", "lift_point": "[-1.0, -1.0]"'
    text = "Action Decision: " + (f"{rest}, {typed}" if last else f"{typed}, {rest}")
    assert parse_autoui_action(text) == Action.type_text(expected), text


# Any text, and text stitched from the pieces of AutoUI's syntax (which plain random text rarely holds).
_typeable = st.one_of(
    st.text(min_size=1, max_size=MAX_TEXT_CHARS),
    st.lists(st.one_of(_fragments, st.text(max_size=4)), min_size=1, max_size=24).map("".join),
).filter(lambda text: 0 < len(text) <= MAX_TEXT_CHARS)
_separators = st.sampled_from([", ", ",", ",\n  ", " ; "])


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    _typeable,
    st.permutations(["action_type", "touch_point", "lift_point", "typed_text"]),
    _separators,
    st.booleans(),
)
def test_any_text_in_any_field_order_parses_back(
    typed: str, order: list[str], separator: str, plan: bool
) -> None:
    formatted = format_autoui_action(Action.type_text(typed))
    assert parse_autoui_action(formatted) == Action.type_text(typed)
    fields = {
        "action_type": '"action_type": "TYPE"',
        "touch_point": '"touch_point": "[-1.0, -1.0]"',
        "lift_point": '"lift_point": "[-1.0, -1.0]"',
        # what format_autoui_action writes for the text
        "typed_text": formatted[formatted.index('"typed_text"') :],
    }
    body = separator.join(fields[name] for name in order)
    text = ("Action Plan: [TYPE,PRESS_BACK] ; Action Decision: " if plan else "") + body
    assert parse_autoui_action(text) == Action.type_text(typed), text


def test_a_repeated_decision_ends_the_typed_text_and_the_first_decision_wins() -> None:
    # A model that repeats itself: the quote before "; Action Decision:" closes the text.
    decision = (
        'Action Decision: "action_type": "TYPE", "touch_point": "[-1.0, -1.0]", '
        '"lift_point": "[-1.0, -1.0]", "typed_text": "shoes"'
    )
    assert parse_autoui_action(f"Action Plan: [TYPE] ; {decision} ; {decision}") == Action.type_text("shoes")
    back_then_type = (
        'Action Plan: [PRESS_BACK] ; Action Decision: "action_type": "PRESS_BACK", "typed_text": "" ; '
        'Action Plan: [TYPE] ; Action Decision: "action_type": "TYPE", "typed_text": "x"'
    )
    assert parse_autoui_action(back_then_type) == Action.press("BACK")
    # The first decision names TYPE but holds no text: a later decision's text is not borrowed.
    borrowed = parse_autoui_action(
        'Action Decision: "action_type": "TYPE" ; Action Decision: "action_type": "TYPE", "typed_text": "x"'
    )
    assert not borrowed.is_valid and "typed_text" in (borrowed.reason or "")


def autoui_fields(action_type: str, touch: str, lift: str, text: str) -> str:
    return (
        f'"action_type": "{action_type}", "touch_point": "[{touch}]", '
        f'"lift_point": "[{lift}]", "typed_text": "{text}"'
    )


_points = st.tuples(coords, coords).map(lambda yx: f"{yx[0]}, {yx[1]}")
# AutoUI's own data does not escape: raw text is anything without a quote or a backslash.
_raw_text = st.text(min_size=1, max_size=200).filter(lambda text: '"' not in text and "\\" not in text)
_decisions = st.one_of(
    st.builds(lambda touch, lift: ("DUAL_POINT", touch, lift, ""), _points, _points),
    st.builds(lambda text: ("TYPE", "-1.0, -1.0", "-1.0, -1.0", text), _raw_text),
    st.sampled_from(["PRESS_BACK", "PRESS_HOME", "PRESS_ENTER", "STATUS_TASK_COMPLETE"]).map(
        lambda kind: (kind, "-1.0, -1.0", "-1.0, -1.0", "")
    ),
)
_repeat_separators = st.sampled_from([" ; ", ";", "\n", " ", ", ", " ;\n"])


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    _decisions,
    st.lists(_decisions, min_size=1, max_size=3),
    st.lists(_repeat_separators, min_size=3, max_size=3),
    st.lists(st.booleans(), min_size=3, max_size=3),
)
def test_the_first_of_repeated_decisions_wins(
    first: tuple[str, str, str, str],
    repeats: list[tuple[str, str, str, str]],
    separators: list[str],
    with_plan: list[bool],
) -> None:
    def decision(fields: tuple[str, str, str, str], plan: bool) -> str:
        return (
            (f"Action Plan: [{fields[0]}] ; " if plan else "") + "Action Decision: " + autoui_fields(*fields)
        )

    alone = parse_autoui_action(decision(first, True))
    assert alone.is_valid, alone
    text = decision(first, True)
    for index, repeat in enumerate(repeats):
        text += separators[index] + decision(repeat, with_plan[index])
    assert parse_autoui_action(text) == alone, text
