"""The screen-only observation's pure parts: OCR boxes -> elements, element taps -> points, and a
stored point tap -> the candidate the learner scores (no OCR model needed here)."""

from __future__ import annotations

import dataclasses

import pytest

from distrl_core.envs.actions import Action, format_action, parse_action
from distrl_core.envs.actions_autoui import format_autoui_action, parse_autoui_action
from distrl_core.envs.observation import Observation, compact_tree
from distrl_core.envs.screen import (
    ScreenConfig,
    TextBox,
    as_executed,
    observation_kind,
    respace,
    screen_elements,
    screen_observation,
)
from distrl_core.policy.candidates import build_candidates, find_candidate

SHOT, SCREEN = (540, 1200), (1080, 2400)


def _observation(boxes: list[TextBox]) -> Observation:
    tree = Observation("Open the Photos app", 0, (), (), "", "<hierarchy/>", b"png", SCREEN)
    return screen_observation(tree, screen_elements(boxes, SHOT, SCREEN))


def test_boxes_become_elements_in_screen_pixels_in_reading_order() -> None:
    boxes = [
        TextBox("Clock", 0.99, (179, 232, 236, 257)),  # a few pixels higher than Settings, same row
        TextBox("Settings", 0.99, (39, 231, 125, 259)),
        TextBox("12:00", 0.99, (1, 5, 62, 28)),  # the status bar
        TextBox("blur", 0.2, (10, 600, 50, 620)),  # low confidence
        TextBox("Page 1 of 2", 0.98, (23, 1125, 132, 1147)),
    ]
    elements = screen_elements(boxes, SHOT, SCREEN)
    assert [e.text for e in elements] == ["Settings", "Clock", "Page 1 of 2"]
    assert elements[0].bounds == (78, 462, 251, 519)  # doubled: the screenshot is half the screen
    assert all(e.clickable and not e.editable for e in elements)
    assert compact_tree(elements).splitlines()[0] == '[0] TextView "Settings" (78,462,251,519)'
    kept = screen_elements(boxes, SHOT, SCREEN, ScreenConfig(min_score=0.1, status_bar=0.0))
    assert [e.text for e in kept] == ["12:00", "Settings", "Clock", "blur", "Page 1 of 2"]


def test_a_trailing_caret_is_a_focused_text_field_so_type_candidates_exist() -> None:
    observation = _observation([TextBox("Search or type web address |", 0.97, (20, 48, 300, 76))])
    (field,) = observation.elements
    assert (field.text, field.editable, field.focused) == ("Search or type web address", True, True)
    candidates = build_candidates('Search the web for "tent"', observation.ui_text)
    assert 'type("tent")' in [c.action_text for c in candidates]


def test_respace_restores_dropped_spaces_from_character_positions() -> None:
    chars = list("Topstories")
    spans = [
        (24, 32),
        (32, 41),
        (42, 52),
        (61, 69),
        (69, 78),
        (79, 89),
        (90, 99),
        (99, 106),
        (106, 115),
        (116, 124),
    ]
    assert respace(chars, spans) == "Top stories"
    # gaps of most of a character inside a word are not spaces (the decoder's columns are coarse)
    assert respace(list("Wea"), [(20, 28), (35, 43), (43, 51)]) == "Wea"
    assert respace(list("a b"), [(0, 8), (8, 12), (12, 20)]) == "a b"


def test_element_taps_are_executed_and_stored_as_box_centres_under_the_screen_observation() -> None:
    observation = _observation([TextBox("Photos", 0.99, (294, 381, 374, 406))])
    assert observation_kind(observation) == "screen" and observation.ui_xml == ""
    point = as_executed(Action.tap(0), observation)
    assert point == Action.tap(point=(0.6185, 0.3279))  # centre (668, 787) of (588,762,749,813)
    assert as_executed(Action.long_press(0), observation).point == point.point
    assert as_executed(Action.tap(5), observation) == Action.tap(5)  # off the list: the env refuses it
    assert as_executed(Action.press("BACK"), observation) == Action.press("BACK")
    tree = dataclasses.replace(observation, extras={})
    assert observation_kind(tree) == "tree" and as_executed(Action.tap(0), tree) == Action.tap(0)


def test_point_taps_round_trip_through_the_action_language_and_autoui() -> None:
    tap = Action.tap(point=(0.6185, 0.3279))
    assert parse_action(format_action(tap)) == tap
    text = format_autoui_action(tap)
    assert '"touch_point": "[0.3279, 0.6185]"' in text  # AutoUI writes [y, x]
    assert parse_autoui_action(text) == tap


def test_the_learner_finds_the_element_a_stored_point_tap_lands_on() -> None:
    ui_text = "\n".join(
        [
            '[0] TextView "Settings" (78,462,251,519)',
            '[1] TextView "Photos" (588,762,749,813)',
            '[2] TextView "Photos album" (560,700,800,900)',  # overlaps [1]: the nearer centre wins
            '[3] TextView "Title" static (40,60,1040,180)',
        ]
    )
    candidates = build_candidates("Open the Photos app", ui_text)
    index = {c.action_text: i for i, c in enumerate(candidates)}
    assert find_candidate(candidates, "tap(1)") == index["tap(1)"]
    assert find_candidate(candidates, "tap(0.6185,0.3279)") == index["tap(1)"]
    assert find_candidate(candidates, "tap(0.1535,0.2043)") == index["tap(0)"]
    assert find_candidate(candidates, "tap(0.55,0.3)") == index["tap(2)"]  # only [2] holds it
    assert find_candidate(candidates, "tap(0.5,0.05)") is None  # a static label: not a candidate
    assert find_candidate(candidates, "tap(0.99,0.99)") is None  # nothing there
    assert find_candidate(candidates, "key(BACK)") == index["key(BACK)"]
    # the screen size the bounds are in decides where a point lands
    assert find_candidate(candidates, "tap(0.6185,0.3279)", (540, 1200)) is None


def test_screen_config_refuses_bad_values() -> None:
    with pytest.raises(ValueError, match="fractions"):
        ScreenConfig(min_score=1.5)
    with pytest.raises(ValueError, match="max_elements"):
        ScreenConfig(max_elements=0)
