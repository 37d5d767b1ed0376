"""Controls drawn beside text (``distrl_core.envs.screen_controls``): switches read on or off as
the UI dump names them, and the caret after a focused field's text, which an OCR reads as a "1"
("22 |" as "221"): on synthetic frames, and on SimDroid's own alarm list, alarm editor and
settings pages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distrl_core.envs.observation import compact_tree
from distrl_core.envs.screen import ScreenConfig, TextBox, screen_elements
from distrl_core.envs.screen_controls import without_caret
from distrl_core.envs.screen_widgets import WidgetBox, find_widgets
from distrl_core.policy.candidates import parse_compact_tree
from simulators.ocr import ocr_missing_reason
from simulators.simdroid.render import DEJAVU_SANS

BG, INK, MUTED, LINE, ACCENT, WHITE = (
    (250, 250, 250), (33, 33, 33), (120, 120, 120), (220, 220, 220), (26, 115, 232), (255, 255, 255),
)  # fmt: skip
W, H = 540, 1200


def _screen() -> np.ndarray:
    pixels = np.full((H, W, 3), BG, np.uint8)
    pixels[:30] = (30, 30, 30)
    return pixels


def _switch(pixels: np.ndarray, mid: int, x1: int, x2: int, on: bool) -> None:
    """SimDroid's switch: a 9-row track (accent when on, grey when off) and a ring knob of 11 by 13
    pixels, white inside, at the track's right end when on, at its left end when off."""
    pixels[mid - 4 : mid + 5, x1:x2] = ACCENT if on else LINE
    cx = x2 - 4 if on else x1 + 4
    yy, xx = np.ogrid[:H, :W]
    d = ((yy - mid) / 6.5) ** 2 + ((xx - cx) / 5.5) ** 2
    pixels[d <= 1.0] = MUTED
    pixels[d <= 0.6] = WHITE


def _rows(pixels: np.ndarray, x: int, y: int, bars: list[tuple[int, int, int]]) -> None:
    """Upright bars ``(dx, top, bottom)`` at column ``x + dx``, rows ``y + top`` to ``y + bottom``."""
    for dx, top, bottom in bars:
        pixels[y + top : y + bottom, x + dx : x + dx + 2] = INK


def test_a_knob_at_the_tracks_right_end_is_on_and_at_its_left_end_off() -> None:
    pixels = _screen()
    _switch(pixels, 205, 487, 517, on=True)
    _switch(pixels, 271, 487, 517, on=False)
    _switch(pixels, 500, 437, 517, on=True)  # a settings row's longer track
    found = find_widgets(pixels, [], top=30)
    assert [(w.kind, w.checked) for w in found] == [("switch", True), ("switch", False), ("switch", True)]
    for widget, mid in zip(found, (205, 271, 500), strict=True):
        x1, y1, x2, y2 = widget.box
        assert y1 < mid - 4 and y2 > mid + 4 and x1 <= 490 and x2 >= 514


def test_an_ocr_box_over_the_knob_does_not_hide_the_switch() -> None:
    pixels = _screen()
    _switch(pixels, 271, 487, 517, on=False)
    (switch,) = find_widgets(pixels, [(484.0, 263.0, 502.0, 281.0)], top=30)  # the knob read as "O"
    assert switch.kind == "switch" and not switch.checked


def test_bars_sliders_letters_and_blocks_are_not_switches() -> None:
    pixels = _screen()
    pixels[200:209, 400:480] = ACCENT  # a bar with no knob (a progress chunk)
    pixels[300:340, 100:150] = MUTED  # a solid block
    # A bold "E": its middle bar has the stem above and below it, running on past the bar.
    pixels[500:560, 200:208] = INK
    for top in (500, 526, 552):
        pixels[top : top + 8, 200:232] = INK
    yy, xx = np.ogrid[:H, :W]  # a slider: a long thin track, its knob mid-track
    pixels[699:702, 20:520] = LINE
    pixels[(yy - 700) ** 2 + (xx - 270) ** 2 <= 25] = ACCENT
    assert [w.kind for w in find_widgets(pixels, [], top=30)] == ["icon", "slider"]


def test_a_switch_is_named_by_the_text_left_of_it_and_flagged_as_the_tree_flags_it() -> None:
    boxes = [
        TextBox("12:00", 0.99, (21.0, 195.0, 82.0, 219.0)),
        TextBox("12:00 alarm", 0.99, (320.0, 193.0, 443.0, 219.0)),
        TextBox("09:10", 0.99, (22.0, 261.0, 82.0, 285.0)),
        TextBox("09:10 alarm", 0.98, (322.0, 260.0, 443.0, 285.0)),
        TextBox("O", 0.67, (484.0, 263.0, 502.0, 281.0)),  # the off knob's ring
    ]
    widgets = [
        WidgetBox("switch", (485, 198, 516, 211), checked=True),
        WidgetBox("switch", (486, 264, 517, 277), checked=False),
    ]
    elements = screen_elements(boxes, (W, H), (2 * W, 2 * H), ScreenConfig(), widgets)
    described = [line.describe() for line in parse_compact_tree(compact_tree(elements))]
    assert described == [
        "TextView 12:00",
        "Switch 12:00 alarm on",
        "TextView 09:10",
        "Switch 09:10 alarm off",
    ]
    switch = elements[3]
    assert switch.checkable and not switch.checked and switch.bounds == (972, 528, 1034, 554)
    # No text beside it: still a switch, by its generic label.
    (alone,) = screen_elements([], (W, H), (2 * W, 2 * H), ScreenConfig(), widgets[:1])
    assert alone.short_class == "Switch" and alone.label == "switch" and alone.checked


def _field(pixels: np.ndarray) -> None:
    """A focused field's frame: 2 px of accent around a white inside, rows 157 to 216."""
    pixels[157:217, 20:520] = WHITE
    pixels[157:159, 20:520] = pixels[215:217, 20:520] = ACCENT
    pixels[157:217, 20:22] = pixels[157:217, 518:520] = ACCENT


def test_a_bar_reaching_below_the_texts_baseline_is_its_caret_and_an_l_is_not() -> None:
    pixels = _screen()
    _field(pixels)
    # "2 2" as two blocks on the baseline (rows 181 to 194), then a caret down to row 199.
    pixels[181:195, 25:34] = pixels[181:195, 37:46] = INK
    _rows(pixels, 56, 0, [(0, 181, 200)])
    text = [(19.0, 174.0, 66.0, 205.0)]  # the OCR's box, over the frame's left side
    found = find_widgets(pixels, text, top=30)
    assert [w for w in found if w.kind == "caret"] == [WidgetBox("caret", (56, 181, 58, 200))]
    pixels[195:200, 56:58] = WHITE  # the same bar ending on the baseline: an "l", no caret
    assert [w.kind for w in find_widgets(pixels, text, top=30)] == []
    # With no text read at all ("7 |" reads as nothing), the caret still makes the field focused.
    pixels[195:200, 56:58] = INK
    (field,) = find_widgets(pixels, [], top=30)
    assert field.kind == "field" and field.focused


def test_the_caret_read_as_a_character_is_dropped_only_where_that_character_lies_over_it() -> None:
    caret_x = 57.0
    assert without_caret("221", [(23, 37), (34, 48), (49, 65)], caret_x) == "22"
    assert without_caret("22 1", [(23, 37), (34, 48), (49, 65)], caret_x) == "22"
    assert without_caret("21|", [(21, 33), (33, 48), (50, 65)], caret_x) == "21"
    # A typed "21" whose caret the OCR did not read: its "1" lies left of the caret, and stays.
    assert without_caret("21", [(21, 33), (33, 48)], caret_x) == "21"
    assert without_caret("21", [(23, 37), (40, 60)], caret_x) == "2"  # this "1" is the caret
    assert without_caret("22", [(23, 37), (40, 60)], caret_x) == "22"  # a "2" is never a caret
    assert without_caret("221", [], caret_x) == "221"  # no spans: nothing is known, nothing dropped


def test_a_caret_after_a_text_makes_it_a_focused_field_without_the_carets_character() -> None:
    caret = WidgetBox("caret", (56, 181, 58, 200))
    read = TextBox("221", 0.79, (19.0, 174.0, 66.0, 205.0), ((23, 37), (34, 48), (49, 65)))
    (element,) = screen_elements([read], (W, H), (2 * W, 2 * H), ScreenConfig(), [caret])
    assert (element.short_class, element.text, element.focused, element.editable) == (
        "EditText",
        "22",
        True,
        True,
    )
    typed = TextBox("21", 0.9, (19.0, 174.0, 50.0, 205.0), ((21, 33), (33, 48)))  # caret unread
    (element,) = screen_elements([typed], (W, H), (2 * W, 2 * H), ScreenConfig(), [caret])
    assert (element.text, element.focused) == ("21", True)
    (plain,) = screen_elements([read], (W, H), (2 * W, 2 * H), ScreenConfig(), [])
    assert (plain.short_class, plain.text, plain.focused) == ("TextView", "221", False)


# ------------------------------------------------------------------------------------------------
# SimDroid's screens

_NO_FONT = None if Path(DEJAVU_SANS).is_file() else f"{DEJAVU_SANS} is not installed (`make system-deps`)"
_NO_OCR = _NO_FONT or ocr_missing_reason()
needs_font = pytest.mark.skipif(_NO_FONT is not None, reason=str(_NO_FONT))
needs_ocr = pytest.mark.skipif(_NO_OCR is not None, reason=str(_NO_OCR))


def _device(task_id: str, page: str) -> Any:
    """A readable SimDroid on ``task_id``, walked by the scripted expert until its page is ``page``."""
    from simulators.factory import make_env
    from simulators.sim_env import SimDroidEnvConfig
    from simulators.simdroid.device import SimDroidConfig
    from simulators.simdroid.expert import expert_action
    from simulators.simdroid.tasks import get_task

    env: Any = make_env(SimDroidEnvConfig(device=SimDroidConfig().readable(), screenshots=False))
    task = get_task(task_id)
    env.reset(task, seed=1)
    for _ in range(6):
        if env.device.state.page.get("name") == page:
            return env.device
        env.step(expert_action(env.device, task))
    raise AssertionError(f"never reached {page}")


def _tap(device: Any, element: Any) -> None:
    x1, y1, x2, y2 = element.bounds
    device.tap((x1 + x2) // 2, (y1 + y2) // 2)


def _read(device: Any) -> list[str]:
    """The screen observation's lines (class, label, flags) of the device's current screen."""
    from simulators.ocr import shared_reader

    boxes, shot, widgets = shared_reader().read_screen(pixels=device.screenshot_pixels(), widgets_below=0.025)
    size = (device.config.width, device.config.height)
    elements = screen_elements(boxes, shot, size, ScreenConfig(), widgets)
    return [line.describe() for line in parse_compact_tree(compact_tree(elements))]


def _tree(device: Any) -> list[str]:
    return [line.describe() for line in parse_compact_tree(compact_tree(device.elements()))]


@needs_font
def test_every_settings_toggle_is_found_on_or_off_as_its_state_in_simdroids_pixels() -> None:
    from simulators.simdroid.catalog import SETTINGS, SETTINGS_PAGES, TOGGLES

    device = _device("general-test-0014", "battery")
    scale = device.config.screenshot_scale
    checked = 0
    for flip in (False, True):
        for page in sorted({t.page for t in TOGGLES}):
            device.start_app(SETTINGS)
            _tap(device, next(e for e in device.elements() if e.text == SETTINGS_PAGES[page]))
            if flip:
                for element in [e for e in device.elements() if e.short_class == "Switch"]:
                    _tap(device, element)
            truth = [e for e in device.elements() if e.short_class == "Switch"]
            found = [w for w in find_widgets(device.screenshot_pixels(), [], top=40) if w.kind == "switch"]
            assert len(found) == len(truth), page
            for widget, element in zip(found, truth, strict=True):
                x1, y1, x2, y2 = (v / scale for v in widget.box)
                centre = ((x1 + x2) / 2, (y1 + y2) / 2)
                assert element.bounds[0] <= centre[0] < element.bounds[2], (page, element)
                assert element.bounds[1] <= centre[1] < element.bounds[3], (page, element)
                assert widget.checked == element.checked, (page, element)
                checked += element.checked
    assert 0 < checked < 2 * len(TOGGLES)  # both states were seen


@needs_ocr
def test_the_alarm_list_reads_each_alarms_switch_on_or_off_as_the_tree_does() -> None:
    device = _device("general-test-0028", "alarms")  # 12:00 on, 09:10 off
    switches = [line for line in _tree(device) if line.startswith("Switch")]
    assert switches == ["Switch 12:00 alarm on", "Switch 09:10 alarm off"]
    assert [line for line in _read(device) if line.startswith("Switch")] == switches
    assert not any(line == "TextView O" for line in _read(device))  # the off knob read as a letter


@needs_ocr
def test_a_settings_toggle_reads_off_then_on_as_the_tree_does() -> None:
    device = _device("general-test-0014", "battery")
    assert [line for line in _tree(device) if line.startswith("Switch")] == ["Switch Battery Saver off"]
    assert [line for line in _read(device) if line.startswith("Switch")] == ["Switch Battery Saver off"]
    _tap(device, next(e for e in device.elements() if e.short_class == "Switch"))
    assert [line for line in _read(device) if line.startswith("Switch")] == ["Switch Battery Saver on"]


@needs_ocr
@pytest.mark.parametrize("typed", ["22", "21", "23"])
def test_the_alarm_editors_hour_reads_as_typed_and_focused(typed: str) -> None:
    device = _device("general-test-0029", "editor")
    assert device.state.focus == "clock.hour"
    device.input_text(typed)
    line = f"EditText {typed} edit focused"
    assert line in _tree(device)
    assert line in _read(device)
