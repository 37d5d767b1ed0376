"""Textless widgets found in a screenshot's pixels (``distrl_core.envs.screen_widgets``): sliders,
icon buttons and empty text fields on synthetic images, as elements the candidate builder acts on,
and on SimDroid's own screens: the brightness slider, the Clock's *Add alarm* icon, and the
scripted expert solving alarm and brightness tasks from the screen alone."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distrl_core.envs.observation import compact_tree
from distrl_core.envs.screen import ObservationKind, ScreenConfig, TextBox, screen_elements
from distrl_core.envs.screen_widgets import WidgetBox, find_widgets
from distrl_core.policy.candidates import build_candidates, parse_compact_tree
from simulators.ocr import ocr_missing_reason
from simulators.simdroid.render import DEJAVU_SANS

BG, INK, LINE, ACCENT = (250, 250, 250), (33, 33, 33), (220, 220, 220), (26, 115, 232)
W, H = 540, 1200


def _screen() -> np.ndarray:
    """(H, W, 3) uint8: an off-white page under a dark status bar."""
    pixels = np.full((H, W, 3), BG, np.uint8)
    pixels[:30] = (30, 30, 30)
    return pixels


def _slider(pixels: np.ndarray, y: int, x1: int, x2: int, knob_x: int | None) -> None:
    """SimDroid's slider: a 3-row track (accent left of the knob, grey right), a knob of radius 5."""
    pixels[y - 1 : y + 2, x1:x2] = LINE
    if knob_x is not None:
        pixels[y - 1 : y + 2, x1:knob_x] = ACCENT
        yy, xx = np.ogrid[:H, :W]
        pixels[(yy - y) ** 2 + (xx - knob_x) ** 2 <= 25] = ACCENT


def test_a_track_with_a_knob_is_a_slider_spanning_the_track() -> None:
    pixels = _screen()
    _slider(pixels, 325, 20, 520, knob_x=120)
    (slider,) = find_widgets(pixels, [], top=30)
    x1, y1, x2, y2 = slider.box
    assert slider.kind == "slider" and (x1, x2) == (20, 520)  # the track's columns, exactly
    assert y1 <= 320 and 330 < y2 <= 332  # the knob's rows, centred on the track


def test_separators_and_knobless_tracks_are_not_sliders() -> None:
    pixels = _screen()
    for y in (200, 300, 400):
        pixels[y, 0:W] = LINE  # a full-width separator under a list row
    pixels[500:503, 20:520] = LINE  # a thick track with no knob (a progress bar)
    _slider(pixels, 700, 420, 520, knob_x=470)  # a switch's short track, knob and all
    assert find_widgets(pixels, [], top=30) == []


def test_a_solid_square_is_an_icon_unless_text_covers_it_or_captions_it() -> None:
    pixels = _screen()
    pixels[1052:1102, 245:295] = (120, 120, 120)  # the Clock's Add alarm square
    # Nothing drawn in it or under it names it: the generic "icon" (tests/envs/test_screen_glyphs.py)
    assert find_widgets(pixels, [], top=30) == [WidgetBox("icon", (245, 1052, 295, 1102), name="icon")]
    covered = [(230.0, 1040.0, 310.0, 1110.0)]  # an OCR box over it: a button with text
    assert find_widgets(pixels, covered, top=30) == []
    caption = [(240.0, 1110.0, 300.0, 1130.0)]  # a label right under it: a launcher icon
    assert find_widgets(pixels, caption, top=30) == []
    pixels[1052:1102, 245:295] = BG
    pixels[1075:1078, 200:340] = INK  # a bar: too flat for an icon, too short for a slider
    pixels[600:606, 100:106] = INK  # a dot: too small
    assert find_widgets(pixels, [], top=30) == []


def test_an_empty_frame_is_a_field_and_a_frame_with_text_is_not() -> None:
    pixels = _screen()
    pixels[272:332, 20:520] = (255, 255, 255)
    pixels[272, 20:520] = pixels[331, 20:520] = pixels[272:332, 20] = pixels[272:332, 519] = (120, 120, 120)
    assert find_widgets(pixels, [], top=30) == [WidgetBox("field", (20, 272, 520, 332))]
    assert find_widgets(pixels, [(24.0, 285.0, 80.0, 320.0)], top=30) == []


def test_an_empty_frame_holding_only_a_caret_is_a_focused_field() -> None:
    pixels = _screen()
    pixels[272:332, 20:520] = (255, 255, 255)
    pixels[272, 20:520] = pixels[331, 20:520] = pixels[272:332, 20] = pixels[272:332, 519] = ACCENT
    assert find_widgets(pixels, [], top=30) == [WidgetBox("field", (20, 272, 520, 332), focused=False)]
    pixels[293:312, 32:34] = (120, 120, 120)  # the caret: a thin upright bar at the text's start
    assert find_widgets(pixels, [], top=30) == [WidgetBox("field", (20, 272, 520, 332), focused=True)]
    pixels[293:312, 32:44] = (120, 120, 120)  # a blob as wide as a letter is no caret
    # ... but ink no OCR box read: where a recogniser is to look (with a margin, inside the frame)
    unread = (23, 275, 59, 329)
    assert find_widgets(pixels, [], top=30) == [
        WidgetBox("field", (20, 272, 520, 332), focused=False, unread=unread)
    ]
    pixels[293:312, 34:44] = (255, 255, 255)
    pixels[300:302, 60:62] = (120, 120, 120)  # nor is a caret with a speck beside it
    assert find_widgets(pixels, [], top=30)[0].focused is False


def test_a_lone_character_no_ocr_box_covers_is_left_for_the_recogniser_short_of_the_caret() -> None:
    """A one-character value ("9 |") that the text detector passed over: the field says where it
    lies (``unread``), stopping before the caret, which still makes the field focused."""
    pixels = _screen()
    pixels[272:332, 20:520] = (255, 255, 255)
    pixels[272, 20:520] = pixels[331, 20:520] = pixels[272:332, 20] = pixels[272:332, 519] = ACCENT
    pixels[290:310, 32:42] = INK  # the digit
    pixels[286:316, 52:54] = INK  # its caret, a space after it, reaching past its baseline
    (field,) = find_widgets(pixels, [], top=30)
    assert field.kind == "field" and field.focused and field.unread == (23, 275, 51, 329)
    pixels[286:316, 52:54] = (255, 255, 255)
    assert find_widgets(pixels, [(28.0, 285.0, 46.0, 315.0)], top=30) == []  # read by the OCR: text


def test_empty_fields_are_named_by_their_form_labels_and_typing_is_offered_in_the_focused_one() -> None:
    boxes = [
        TextBox("Hour (0-23)", 0.99, (22.0, 119.0, 135.0, 143.0)),
        TextBox("Minute (0-59)", 0.99, (22.0, 234.0, 155.0, 258.0)),
        TextBox("Notes", 0.99, (22.0, 420.0, 80.0, 444.0)),  # a label left of its field
    ]
    widgets = [
        WidgetBox("field", (20, 157, 520, 217), focused=True),
        WidgetBox("field", (20, 272, 520, 332)),
        WidgetBox("field", (100, 402, 520, 462)),
        WidgetBox("field", (20, 700, 520, 760)),  # nothing reads near it: still "field"
    ]
    elements = screen_elements(boxes, (W, H), (2 * W, 2 * H), ScreenConfig(), widgets)
    text = compact_tree(elements)
    described = [line.describe() for line in parse_compact_tree(text)]
    assert described == [
        "TextView Hour (0-23)",
        "EditText Hour (0-23) edit focused",
        "TextView Minute (0-59)",
        "EditText Minute (0-59) edit",
        "TextView Notes",
        "EditText Notes edit",
        "EditText field edit",
    ]
    offered = [c.text for c in build_candidates("Set an alarm for 10:30 PM", text)]
    assert "type hour 22" in offered and "type minute 30" in offered
    # No caret seen: no field is focused, and nothing is offered to type.
    unfocused = [dataclasses.replace(w, focused=False) for w in widgets]
    text = compact_tree(screen_elements(boxes, (W, H), (2 * W, 2 * H), ScreenConfig(), unfocused))
    assert not any(c.text.startswith("type") for c in build_candidates("Set an alarm for 10:30 PM", text))


def test_the_status_bar_is_ignored() -> None:
    pixels = _screen()
    pixels[5:25, 500:520] = (255, 255, 255)  # a status icon
    assert find_widgets(pixels, [], top=30) == []


def test_widgets_become_elements_in_reading_order_and_sliders_get_percentage_taps() -> None:
    boxes = [TextBox("Brightness level", 0.99, (24.0, 255.0, 176.0, 280.0))]
    widgets = [WidgetBox("slider", (20, 320, 520, 331)), WidgetBox("icon", (32, 32, 67, 68))]
    elements = screen_elements(boxes, (W, H), (2 * W, 2 * H), ScreenConfig(), widgets)
    assert [e.short_class for e in elements] == ["ImageButton", "TextView", "SeekBar"]
    assert elements[2].bounds == (40, 640, 1040, 662)  # screen pixels, x2 and y2 exclusive
    lines = parse_compact_tree(compact_tree(elements))
    assert [line.describe() for line in lines] == [
        "ImageButton icon",
        "TextView Brightness level",
        "SeekBar slider",
    ]
    taps = [c for c in build_candidates("Set brightness to 40%", compact_tree(elements)) if c.line == 2]
    assert [c.text for c in taps] == ["SeekBar slider", "SeekBar slider at 40 %"]
    x, y = taps[1].action.point or (0.0, 0.0)
    assert round(x * 2 * W) == round(40 + 0.4 * 999) and 640 <= y * 2 * H < 662
    assert screen_elements(boxes, (W, H), (2 * W, 2 * H), ScreenConfig(), ()) == screen_elements(
        boxes, (W, H), (2 * W, 2 * H)
    )


# ------------------------------------------------------------------------------------------------
# SimDroid's screens

_NO_FONT = None if Path(DEJAVU_SANS).is_file() else f"{DEJAVU_SANS} is not installed (`make system-deps`)"
_NO_OCR = _NO_FONT or ocr_missing_reason()
needs_font = pytest.mark.skipif(_NO_FONT is not None, reason=str(_NO_FONT))
needs_ocr = pytest.mark.skipif(_NO_OCR is not None, reason=str(_NO_OCR))


def _walk_to(kind: str, page: str, observation: ObservationKind = "tree", screenshots: bool = True) -> Any:
    """A readable SimDroid environment on the first General test task of ``kind``, walked by the
    scripted expert until its page is ``page``."""
    from simulators.factory import make_env
    from simulators.sim_env import SimDroidEnvConfig
    from simulators.simdroid.device import SimDroidConfig
    from simulators.simdroid.expert import expert_action
    from simulators.simdroid.tasks import load_tasks

    task = next(t for t in load_tasks("general", "test") if t.kind == kind)
    config = SimDroidEnvConfig(
        device=SimDroidConfig().readable(), screenshots=screenshots, observation=observation
    )
    env: Any = make_env(config)
    observation_now = env.reset(task, seed=1)
    for _ in range(5):
        if env.device.state.page.get("name") == page:
            return env, task, observation_now
        observation_now = env.step(expert_action(env.device, task)).observation
    raise AssertionError(f"never reached {page}")


@needs_font
def test_the_display_page_brightness_slider_is_found_in_simdroids_pixels() -> None:
    env, _, _ = _walk_to("set_brightness", "display")
    device = env.device
    truth = next(e for e in device.elements() if e.short_class == "SeekBar")
    pixels = device.screenshot_pixels()
    scale = device.config.screenshot_scale
    sliders = [w for w in find_widgets(pixels, [], top=40) if w.kind == "slider"]
    assert len(sliders) == 1
    x1, y1, x2, y2 = (round(v / scale) for v in sliders[0].box)
    centre_row = (truth.bounds[1] + truth.bounds[3]) // 2
    assert y1 <= centre_row < y2 and abs(x1 - truth.bounds[0]) <= 2 and abs(x2 - truth.bounds[2]) <= 2


@needs_font
def test_the_alarm_editors_focused_empty_field_shows_its_caret_in_simdroids_pixels() -> None:
    from distrl_core.envs.actions import Action
    from simulators.factory import make_env
    from simulators.sim_env import SimDroidEnvConfig
    from simulators.simdroid.device import SimDroidConfig
    from simulators.simdroid.expert import expert_action
    from simulators.simdroid.tasks import get_task

    env: Any = make_env(SimDroidEnvConfig(device=SimDroidConfig().readable(), screenshots=False))
    task = get_task("general-test-0029")  # no such alarm yet: Add alarm opens the editor
    env.reset(task, seed=1)
    device = env.device
    while device.state.page.get("name") != "editor":
        env.step(expert_action(device, task))
    assert device.state.focus == "clock.hour"  # the editor opens on the empty hour field
    fields = [w for w in find_widgets(device.screenshot_pixels(), [], top=40) if w.kind == "field"]
    assert [w.focused for w in fields] == [True, False]  # hour focused, minute not
    minute = next(e for e in device.elements() if e.resource_id.endswith("minute_input"))
    env.step(Action.tap(minute.index))
    assert device.state.focus == "clock.minute"
    fields = [w for w in find_widgets(device.screenshot_pixels(), [], top=40) if w.kind == "field"]
    assert [w.focused for w in fields] == [False, True]


@needs_ocr
def test_the_add_alarm_icon_is_an_element_the_expert_taps_through_the_screen() -> None:
    from distrl_core.envs.actions import Action
    from simulators.screen_env import on_screen

    env, _, observation = _walk_to("set_alarm", "alarms", observation="screen", screenshots=False)
    truth = next(e for e in env.device.elements() if e.content_desc == "Add alarm")
    found = on_screen(Action.tap(truth.index), env.device, observation)
    assert found.index is not None, found
    element = observation.elements[found.index]
    x, y = element.center
    assert element.short_class == "ImageButton" and element.label == "add"  # named by its "+"
    assert truth.bounds[0] <= x < truth.bounds[2] and truth.bounds[1] <= y < truth.bounds[3]
    # The OCR's boxes alone: nothing is read where Add alarm is drawn.
    frame = env.env.screen_pixels()
    boxes, shot, _ = env.reader.read_screen(pixels=frame.pixels, key=frame.key)
    plain = dataclasses.replace(observation, elements=screen_elements(boxes, shot, observation.screen_size))
    assert on_screen(Action.tap(truth.index), env.device, plain).index is None


@needs_ocr
def test_a_one_digit_hour_typed_into_the_alarm_editor_is_read_and_stays_the_focused_field() -> None:
    """The detector passes over a lone "9" before the caret; the recogniser reads it in the field,
    so the screen shows what was typed (else the prompt after typing equals the one before)."""
    from distrl_core.envs.actions import Action
    from simulators.factory import make_env
    from simulators.sim_env import SimDroidEnvConfig
    from simulators.simdroid.device import SimDroidConfig
    from simulators.simdroid.expert import expert_action
    from simulators.simdroid.tasks import get_task

    config = SimDroidEnvConfig(device=SimDroidConfig().readable(), screenshots=False, observation="screen")
    env: Any = make_env(config)
    task = get_task("general-test-0029")  # no such alarm yet: Add alarm opens the editor
    env.reset(task, seed=1)
    for _ in range(4):
        if env.device.state.page.get("name") == "editor":
            break
        env.step(expert_action(env.device, task))
    assert env.device.state.focus == "clock.hour"
    observation = env.step(Action.type_text("9")).observation
    focused = [e for e in observation.elements if e.focused]
    assert [(e.short_class, e.label) for e in focused] == [("EditText", "9")]
    hour = next(e for e in env.device.elements() if e.resource_id.endswith("hour_input"))
    x, y = focused[0].center
    assert hour.bounds[0] <= x < hour.bounds[2] and hour.bounds[1] <= y < hour.bounds[3]


@needs_ocr
@pytest.mark.slow  # two episodes, every step read by the OCR
def test_the_expert_sets_an_alarm_and_the_brightness_from_the_screen_alone() -> None:
    from simulators.rollout import RolloutConfig, run_episodes
    from simulators.screen_env import screen_expert_actor
    from simulators.sim_env import SimDroidEnvConfig
    from simulators.simdroid.tasks import load_tasks

    tests = load_tasks("general", "test")
    # An alarm that does not exist yet (Add alarm, two fields, OK) and a brightness level.
    alarm = next(t for t in tests if t.kind == "set_alarm" and t.task_id == "general-test-0029")
    brightness = next(t for t in tests if t.kind == "set_brightness")
    config = RolloutConfig(
        env=SimDroidEnvConfig(observation="screen", screenshots=False, ui_xml=False), seed=5
    )
    result = run_episodes(screen_expert_actor(0.0, 5), [alarm, brightness], config)
    assert [e.success for e in result.episodes] == [True, True], result.episodes
    assert any(r["action"].startswith("tap(0.") for r in result.rows)
