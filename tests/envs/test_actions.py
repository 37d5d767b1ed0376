"""The canonical action language: construction rules, exact round trips, and a parser that never raises."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distrl_core.envs.action_rules import utf8_safe
from distrl_core.envs.actions import (
    KEYCODES,
    MAX_TEXT_CHARS,
    Action,
    ActionKind,
    format_action,
    parse_action,
    swipe_endpoints,
    to_pixels,
)

coords = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
points = st.tuples(coords, coords)
texts = st.text(min_size=1, max_size=60)

valid_actions = st.one_of(
    st.builds(Action.tap, st.integers(0, 10_000)),
    st.builds(lambda p: Action.tap(point=p), points),
    st.builds(Action.long_press, st.integers(0, 10_000)),
    st.builds(lambda p: Action.long_press(point=p), points),
    st.builds(Action.swipe, st.sampled_from(["up", "down", "left", "right"])),
    st.builds(lambda a, b: Action.swipe(start=a, end=b), points, points),
    st.builds(Action.type_text, texts),
    st.builds(Action.open_app, texts.filter(str.strip)),
    st.builds(Action.press, st.sampled_from(sorted(KEYCODES))),
    st.sampled_from([Action.complete(), Action.impossible()]),
)


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(valid_actions)
def test_format_then_parse_round_trips_exactly(action: Action) -> None:
    text = format_action(action)
    parsed = parse_action(text)
    assert parsed == action, (text, parsed)
    assert format_action(parsed) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("tap(3)", Action.tap(3)),
        ("  Action: TAP( 3 ) ", Action.tap(3)),
        ("action:tap(0.52, 0.31).", Action.tap(point=(0.52, 0.31))),
        ("`long_press(0.5,0.5)`", Action.long_press(point=(0.5, 0.5))),
        ("Swipe(UP);", Action.swipe("up")),
        ("swipe(0.5,0.8,0.5,0.2)", Action.swipe(start=(0.5, 0.8), end=(0.5, 0.2))),
        ('type("hello world")', Action.type_text("hello world")),
        (r'type("say \"hi\"\n")', Action.type_text('say "hi"\n')),
        ("key(back)", Action.press("BACK")),
        ("key(KEYCODE_ENTER)", Action.press("ENTER")),
        ('open_app("Settings")', Action.open_app("Settings")),
        ("open_app(Settings)", Action.open_app("Settings")),
        ("open_app(com.android.chrome)", Action.open_app("com.android.chrome")),
        ("STATUS(Complete)", Action.complete()),
        ("status(impossible)", Action.impossible()),
        ("tap(1,0)", Action.tap(point=(1.0, 0.0))),
    ],
)
def test_tolerant_parsing_of_known_forms(text: str, expected: Action) -> None:
    assert parse_action(text) == expected


@pytest.mark.parametrize(
    ("text", "reason_part"),
    [
        ("", "name(arguments)"),
        ("click(3)", "unknown action"),
        ("tap()", "element index or two coordinates"),
        ("tap(3.0)", "element index or two coordinates"),
        ("tap(-1)", "element index or two coordinates"),
        ("tap(1.2,0.5)", "normalized"),
        ("tap(0.5,0.5,0.5)", "element index or two coordinates"),
        ("swipe(sideways)", "up/down/left/right"),
        ("swipe(0.1,0.2,0.3,1.5)", "normalized"),
        ("type(hello)", "double-quoted"),
        ('type("")', "1.."),
        (r'type("bad \x escape")', "double-quoted"),
        ('type("unterminated)', "double-quoted"),
        ("type(" + '"' + "a" * (MAX_TEXT_CHARS + 1) + '"' + ")", "1.."),
        ("key(MENU)", "key must be"),
        ("status(done)", "status must be"),
        ('open_app("   ")', "non-blank"),
        ("tap(3) and then tap(4)", "element index"),
        ("Action: ", "name(arguments)"),
    ],
)
def test_malformed_text_becomes_an_invalid_action_with_a_reason(text: str, reason_part: str) -> None:
    action = parse_action(text)
    assert not action.is_valid
    assert action.kind is ActionKind.INVALID
    assert action.raw == text
    assert reason_part in (action.reason or "")


def test_non_string_input_is_invalid_not_an_error() -> None:
    for value in (None, b"tap(3)", 3, ["tap(3)"]):
        action = parse_action(value)
        assert not action.is_valid


def _assert_never_internal_error(text: str) -> None:
    action = parse_action(text)
    assert isinstance(action, Action)
    if not action.is_valid:
        # Kept as written, except half of a surrogate pair, which no device or shard can take.
        assert action.raw == utf8_safe(text)
        assert "internal parser error" not in (action.reason or "")
    else:
        # whatever parsed must be canonical: formatting and re-parsing gives the same action
        assert parse_action(format_action(action)) == action


@settings(max_examples=3000, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=80))
def test_random_strings_never_raise(text: str) -> None:
    _assert_never_internal_error(text)


# Near misses: valid actions with one random edit, and grammar-shaped junk.
_fragments = st.sampled_from(
    [
        "tap", "long_press", "swipe", "type", "key", "open_app", "status", "(", ")", ",", '"', "\\",
        "0.5", "1", "-1", "1e3", "nan", "inf", "up", "BACK", "complete", " ", "Action:", ".", ";", "\n", "`",
    ]
)  # fmt: skip


@st.composite
def near_misses(draw: st.DrawFn) -> str:
    base = format_action(draw(valid_actions))
    edit = draw(st.sampled_from(["insert", "delete", "replace", "truncate", "junk"]))
    if edit == "junk":
        return "".join(draw(st.lists(_fragments, max_size=12)))
    position = draw(st.integers(0, len(base)))
    if edit == "truncate":
        return base[:position]
    piece = draw(st.one_of(_fragments, st.characters()))
    if edit == "insert":
        return base[:position] + piece + base[position:]
    if edit == "delete":
        return base[:position] + base[position + 1 :]
    return base[:position] + piece + base[position + 1 :]


@settings(max_examples=3000, suppress_health_check=[HealthCheck.too_slow])
@given(near_misses())
def test_near_miss_strings_never_raise(text: str) -> None:
    _assert_never_internal_error(text)


def test_constructor_rejects_inconsistent_actions_with_a_clear_message() -> None:
    with pytest.raises(ValueError, match="exactly one of index= or point="):
        Action.tap()
    with pytest.raises(ValueError, match="exactly one of index= or point="):
        Action.tap(3, point=(0.1, 0.1))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        Action.tap(point=(1.5, 0.1))
    with pytest.raises(ValueError, match="does not take"):
        Action(ActionKind.KEY, key="BACK", text="x")
    with pytest.raises(ValueError, match="key must be one of"):
        Action.press("volume_up")
    with pytest.raises(ValueError, match="direction"):
        Action.swipe("diagonal")


def test_points_are_rounded_so_text_stays_short() -> None:
    action = Action.tap(point=(0.123456, 0.9))
    assert action.point == (0.1235, 0.9)
    assert format_action(action) == "tap(0.1235,0.9)"
    assert format_action(Action.tap(point=(-0.0, 1.0))) == "tap(0.0,1.0)"


def test_keycodes_and_geometry_helpers() -> None:
    assert Action.press("back").keycode == 4
    assert Action.press("HOME").keycode == 3
    assert Action.press("enter").keycode == 66
    assert Action.tap(1).keycode is None
    assert to_pixels((0.5, 0.25), (1080, 2400)) == (540, 600)
    assert to_pixels((1.0, 1.0), (1080, 2400)) == (1079, 2399)
    start, end = swipe_endpoints(Action.swipe("up"))
    assert start[1] > end[1] and start[0] == end[0]
    start, end = swipe_endpoints(Action.swipe("left"))
    assert start[0] > end[0]
    with pytest.raises(ValueError):
        swipe_endpoints(Action.tap(0))


def test_str_of_an_action_is_its_canonical_text() -> None:
    assert str(Action.open_app("Clock")) == 'open_app("Clock")'
    assert str(Action.invalid("blah", "why")) == 'invalid("blah")'


def test_lone_surrogate_text_is_rejected_at_parse_time() -> None:
    # json.loads turns the escape into half an emoji: no UTF-8 form, so no shard could store it.
    action = parse_action('type("\\ud83d")')
    assert not action.is_valid and "surrogate" in (action.reason or "")
    assert parse_action('type("\\ud83d\\ude00")') == Action.type_text("\U0001f600")
    raw = parse_action('type("\ud83d")')  # the raw character itself
    assert not raw.is_valid
    format_action(raw).encode("utf-8")  # what the step row stores stays writable
    with pytest.raises(ValueError, match="surrogate"):
        Action.type_text("\ud83d")
