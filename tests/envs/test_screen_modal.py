"""A modal dialog over a dimmed page (``distrl_core.envs.screen_modal``): the screen observation
keeps the dialog's elements alone, as the UI dump does, instead of offering every label of the page
under the scrim as a tap that reaches nothing. On synthetic frames (a phone's alpha scrim, a page
with darker bars and cards but no scrim) and on SimDroid's own dialogs (a grey stipple)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distrl_core.envs.screen import ScreenConfig, TextBox, find_text, screen_elements
from distrl_core.envs.screen_modal import find_modal
from distrl_core.envs.screen_widgets import WidgetBox, find_widgets
from simulators.ocr import ocr_missing_reason
from simulators.simdroid.render import DEJAVU_SANS

W, H = 540, 1200
PAGE, INK, BAR, CARD = (250, 250, 250), (33, 33, 33), (26, 115, 232), (236, 236, 236)


def _page() -> np.ndarray:
    """A page: status bar, a coloured title bar, grey cards holding text lines, a bottom bar."""
    pixels = np.full((H, W, 3), PAGE, np.uint8)
    pixels[:30] = (30, 30, 30)
    pixels[30:100] = BAR
    for top in range(140, 1000, 120):
        pixels[top : top + 100, 20:520] = CARD
        pixels[top + 40 : top + 60, 40:300] = INK  # a text line
    pixels[1120:] = BAR
    return pixels


def _with_dialog(pixels: np.ndarray, panel: tuple[int, int, int, int]) -> np.ndarray:
    """``pixels`` under a 40 % black scrim, as Android draws one, with a white panel on top."""
    dimmed = (pixels.astype(np.float32) * 0.6).astype(np.uint8)
    dimmed[:30] = pixels[:30]  # the status bar stays as it is
    x1, y1, x2, y2 = panel
    dimmed[y1:y2, x1:x2] = (255, 255, 255)
    dimmed[y1 + 30 : y1 + 50, x1 + 20 : x1 + 300] = INK  # the title
    dimmed[y2 - 60 : y2 - 40, x2 - 160 : x2 - 40] = INK  # a button's label
    return dimmed


def test_a_phones_scrim_gives_the_dialogs_panel_and_a_page_without_one_gives_none() -> None:
    page = _page()
    assert find_modal(page, top=30) is None  # title bar, cards and bottom bar are no scrim
    assert not [w for w in find_widgets(page, [], top=30) if w.kind == "modal"]
    panel = (40, 420, 500, 700)
    found = find_modal(_with_dialog(page, panel), top=30)
    assert found is not None
    x1, y1, x2, y2 = found
    assert abs(x1 - 40) <= 8 and abs(x2 - 500) <= 8 and abs(y1 - 420) <= 8 and abs(y2 - 700) <= 8
    assert ("modal", found) in [(w.kind, w.box) for w in find_widgets(_with_dialog(page, panel), [], top=30)]


def test_a_dark_screen_or_a_full_width_light_band_is_no_dialog() -> None:
    dark = np.full((H, W, 3), 20, np.uint8)
    dark[400:700, 40:500] = 255  # a light card on a dark page: the page is dark, not dimmed
    assert find_modal(dark, top=30) is None
    banded = _page()
    banded[420:700] = 255  # a light band reaching both edges has no scrim beside it
    assert find_modal(banded, top=30) is None


def _box(text: str, x1: float, y1: float, x2: float, y2: float) -> TextBox:
    return TextBox(text, 0.99, (x1, y1, x2, y2))


def test_under_a_dialog_only_what_lies_inside_its_panel_becomes_an_element() -> None:
    boxes = [
        _box("Settings", 40, 200, 160, 230),  # the page under the scrim
        _box("Allow notifications?", 60, 450, 300, 470),
        _box("Allow", 340, 640, 400, 660),
        _box("Clock", 40, 900, 140, 930),
    ]
    widgets = [WidgetBox("icon", (240, 1000, 290, 1050)), WidgetBox("modal", (40, 420, 500, 700))]
    elements = screen_elements(boxes, (W, H), (2 * W, 2 * H), ScreenConfig(), widgets)
    assert [e.label for e in elements] == ["Allow notifications?", "Allow"]
    assert [e.index for e in elements] == [0, 1]
    # Without the panel every box is an element, as before.
    plain = screen_elements(boxes, (W, H), (2 * W, 2 * H), ScreenConfig(), widgets[:1])
    assert [e.label for e in plain] == ["Settings", "Allow notifications?", "Allow", "Clock", "icon"]


# ------------------------------------------------------------------------------------------------
# SimDroid's dialogs

_NO_FONT = None if Path(DEJAVU_SANS).is_file() else f"{DEJAVU_SANS} is not installed (`make system-deps`)"
_NO_OCR = _NO_FONT or ocr_missing_reason()
needs_font = pytest.mark.skipif(_NO_FONT is not None, reason=str(_NO_FONT))
needs_ocr = pytest.mark.skipif(_NO_OCR is not None, reason=str(_NO_OCR))


def _device(task_id: str) -> Any:
    from simulators.simdroid.device import SimDroid, SimDroidConfig
    from simulators.simdroid.tasks import get_task

    device = SimDroid(SimDroidConfig().readable())
    device.load_task(get_task(task_id), 0)
    return device


def _show(device: Any, dialog: dict[str, Any] | None) -> None:
    device._mutate(lambda: setattr(device.state, "dialog", None if dialog is None else dict(dialog)))


@needs_font
def test_every_simdroid_dialog_is_found_over_every_app_and_no_page_without_one() -> None:
    from simulators.simdroid.catalog import CHROME, CLOCK, SETTINGS
    from simulators.simdroid.screens import GENERIC_DIALOGS, SHOP_DIALOGS

    device = _device("general-train-0000")
    scale = device.config.screenshot_scale
    top = int(0.025 * device.shot_size[1])
    for app in (SETTINGS, CLOCK, CHROME):
        device.start_app(app)
        assert find_modal(device.screenshot_pixels(), top) is None, app
        for dialog in GENERIC_DIALOGS + SHOP_DIALOGS:
            _show(device, dialog)
            panel = find_modal(device.screenshot_pixels(), top)
            assert panel is not None, (app, dialog["kind"])
            for element in device.elements():  # the dialog's, all inside the panel
                cx, cy = (
                    (v + w) / 2 * scale for v, w in zip(element.bounds[:2], element.bounds[2:], strict=True)
                )
                assert panel[0] <= cx < panel[2] and panel[1] <= cy < panel[3], (app, element)
            _show(device, None)
            assert find_modal(device.screenshot_pixels(), top) is None, (app, "dismissed")


@needs_ocr
def test_the_screen_under_a_dialog_reads_the_dialogs_elements_alone_as_the_tree_does() -> None:
    from simulators.ocr import shared_reader
    from simulators.simdroid.catalog import CLOCK
    from simulators.simdroid.screens import GENERIC_DIALOGS

    device = _device("general-train-0000")
    device.start_app(CLOCK)
    _show(device, GENERIC_DIALOGS[0])  # "Allow notifications?" over the alarm list
    boxes, shot, widgets = shared_reader().read_screen(pixels=device.screenshot_pixels(), widgets_below=0.025)
    elements = screen_elements(boxes, shot, device.size, ScreenConfig(), widgets)
    truth = device.elements()
    assert len(elements) == len(truth)
    for element in truth:  # each read (up to the OCR's spacing) where the dump has it
        found = find_text(elements, element.label)
        assert found is not None, element.label
        x, y = elements[found].center
        assert element.bounds[0] <= x < element.bounds[2] and element.bounds[1] <= y < element.bounds[3]
    assert not any(find_text(elements, label) is not None for label in ("Alarm", "Stopwatch", "Timer"))
