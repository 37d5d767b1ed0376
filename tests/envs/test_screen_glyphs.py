"""Text-less icons named by their glyph's shape (``distrl_core.envs.screen_glyphs``): glyphs drawn
here with Pillow's lines and ellipses (not any UI's bitmaps) at several sizes, strokes and colours,
inside a phone-style button and under SimDroid's grey square, and SimDroid's own *Add alarm* and
*Navigate up* buttons named from its pixels."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageDraw

from distrl_core.envs.screen import ScreenConfig, screen_elements
from distrl_core.envs.screen_glyphs import UNSURE, classify_glyph
from distrl_core.envs.screen_widgets import find_widgets
from simulators.simdroid.render import DEJAVU_SANS

Draw = Callable[[ImageDraw.ImageDraw, int, int, int, Any], None]  # (draw, x0, y0, side, ink, stroke)


def _plus(d: ImageDraw.ImageDraw, x: int, y: int, s: int, ink: Any, t: int) -> None:
    d.line((x, y + s // 2, x + s, y + s // 2), fill=ink, width=t)
    d.line((x + s // 2, y, x + s // 2, y + s), fill=ink, width=t)


def _cross(d: ImageDraw.ImageDraw, x: int, y: int, s: int, ink: Any, t: int) -> None:
    d.line((x, y, x + s, y + s), fill=ink, width=t)
    d.line((x + s, y, x, y + s), fill=ink, width=t)


def _chevron_left(d: ImageDraw.ImageDraw, x: int, y: int, s: int, ink: Any, t: int) -> None:
    d.line((x + s * 2 // 3, y, x, y + s // 2, x + s * 2 // 3, y + s), fill=ink, width=t, joint="curve")


def _chevron_right(d: ImageDraw.ImageDraw, x: int, y: int, s: int, ink: Any, t: int) -> None:
    d.line((x, y, x + s * 2 // 3, y + s // 2, x, y + s), fill=ink, width=t, joint="curve")


def _arrow_left(d: ImageDraw.ImageDraw, x: int, y: int, s: int, ink: Any, t: int) -> None:
    d.line((x, y + s // 2, x + s, y + s // 2), fill=ink, width=t)
    d.line((x + s * 2 // 5, y, x, y + s // 2, x + s * 2 // 5, y + s), fill=ink, width=t, joint="curve")


def _bars(d: ImageDraw.ImageDraw, x: int, y: int, s: int, ink: Any, t: int) -> None:
    for row in (y, y + s // 2, y + s):
        d.line((x, row, x + s, row), fill=ink, width=t)


def _magnifier(d: ImageDraw.ImageDraw, x: int, y: int, s: int, ink: Any, t: int) -> None:
    r = s * 3 // 10
    d.ellipse((x, y, x + 2 * r, y + 2 * r), outline=ink, width=t)
    edge = r + r / math.sqrt(2)
    d.line((x + edge, y + edge, x + s, y + s), fill=ink, width=t + 1)


def _gear(d: ImageDraw.ImageDraw, x: int, y: int, s: int, ink: Any, t: int) -> None:
    c, teeth = s / 2, 8
    points = []
    for i in range(4 * teeth):  # each tooth: two outer corners, then two inner ones
        radius = c if i % 4 < 2 else c * 0.72
        angle = 2 * math.pi * (i - 0.5) / (4 * teeth)
        points.append((x + c + radius * math.cos(angle), y + c + radius * math.sin(angle)))
    d.polygon(points, fill=ink)
    hole = c * 0.3
    d.ellipse((x + c - hole, y + c - hole, x + c + hole, y + c + hole), fill=(0, 0, 0, 0))


def _ring(d: ImageDraw.ImageDraw, x: int, y: int, s: int, ink: Any, t: int) -> None:
    d.ellipse((x, y, x + s, y + s), outline=ink, width=t)


def _tee(d: ImageDraw.ImageDraw, x: int, y: int, s: int, ink: Any, t: int) -> None:
    d.line((x, y, x + s, y), fill=ink, width=t)
    d.line((x + s // 2, y, x + s // 2, y + s), fill=ink, width=t)


def _disc(d: ImageDraw.ImageDraw, x: int, y: int, s: int, ink: Any, t: int) -> None:
    d.ellipse((x, y, x + s, y + s), fill=ink)


def _mask(draw: Draw, side: int, stroke: int) -> np.ndarray:
    """The glyph drawn black on transparent at ``side`` pixels, as a bool mask of its ink."""
    image = Image.new("RGBA", (side + 2 * stroke + 4, side + 2 * stroke + 4), (0, 0, 0, 0))
    draw(ImageDraw.Draw(image), stroke + 2, stroke + 2, side, (0, 0, 0, 255), stroke)
    ink = np.asarray(image)[:, :, 3] >= 128
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    return ink[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]


GLYPHS: list[tuple[str, Draw]] = [
    ("add", _plus),
    ("close", _cross),
    ("back", _chevron_left),
    ("forward", _chevron_right),
    ("back", _arrow_left),
    ("menu", _bars),
    ("search", _magnifier),
    ("settings", _gear),
]


@pytest.mark.parametrize(("name", "draw"), GLYPHS, ids=[f"{n}-{d.__name__}" for n, d in GLYPHS])
@pytest.mark.parametrize(("side", "stroke"), [(11, 2), (18, 2), (24, 3), (40, 5), (64, 7)])
def test_each_glyph_is_named_at_every_size_and_stroke(name: str, draw: Draw, side: int, stroke: int) -> None:
    if draw in (_magnifier, _gear) and side < 18:
        pytest.skip("a ring's hole closes up at this size")
    assert classify_glyph(_mask(draw, side, stroke)) == name


@pytest.mark.parametrize("draw", [_ring, _tee, _disc], ids=lambda d: d.__name__)
@pytest.mark.parametrize(("side", "stroke"), [(12, 2), (24, 3), (48, 5)])
def test_shapes_that_are_no_known_glyph_stay_unnamed(draw: Draw, side: int, stroke: int) -> None:
    assert classify_glyph(_mask(draw, side, stroke)) == UNSURE


def test_a_dot_is_too_small_to_name() -> None:
    assert classify_glyph(np.ones((3, 3), bool)) == UNSURE


def _page() -> Image.Image:
    image = Image.new("RGB", (540, 1200), (250, 250, 250))
    ImageDraw.Draw(image).rectangle((0, 0, 540, 30), fill=(30, 30, 30))
    return image


@pytest.mark.parametrize(("fill", "ink"), [((26, 115, 232), (255, 255, 255)), ((250, 200, 40), (33, 33, 33))])
@pytest.mark.parametrize("side", [44, 72])
def test_a_buttons_glyph_is_what_its_fill_encloses_in_any_colour(
    fill: tuple[int, int, int], ink: tuple[int, int, int], side: int
) -> None:
    """A phone's floating action button: a round fill with its glyph inside, in its own colours;
    and a menu button beside it in the app bar."""
    image = _page()
    d = ImageDraw.Draw(image)
    d.ellipse((240, 1000, 240 + side, 1000 + side), fill=fill)
    _plus(d, 240 + side // 4, 1000 + side // 4, side // 2, ink, max(2, side // 12))
    d.rectangle((20, 50, 20 + side, 50 + side), fill=fill)
    _bars(d, 20 + side // 4, 50 + side // 4, side // 2, ink, max(2, side // 12))
    widgets = find_widgets(np.asarray(image), [], top=30)
    assert [(w.kind, w.name) for w in widgets] == [("icon", "menu"), ("icon", "add")]
    elements = screen_elements([], (540, 1200), (1080, 2400), ScreenConfig(), widgets)
    assert [(e.short_class, e.label) for e in elements] == [("ImageButton", "menu"), ("ImageButton", "add")]


def test_a_solid_square_with_its_glyph_under_it_is_named_by_that_glyph() -> None:
    """SimDroid's way: a grey square, its glyph drawn beneath as a mark an OCR reads as nothing;
    a square with nothing under it, or a rule under it, stays "icon"."""
    image = _page()
    d = ImageDraw.Draw(image)
    for x, draw in ((60, _plus), (240, _chevron_left), (420, None)):
        d.rectangle((x, 600, x + 49, 649), fill=(120, 120, 120))
        if draw is not None:
            draw(d, x + 19, 658, 12, (33, 33, 33), 2)
    d.rectangle((240, 900, 289, 949), fill=(120, 120, 120))
    d.line((0, 960, 540, 960), fill=(33, 33, 33), width=2)  # a rule right under it
    names = [(w.box[0], w.box[1], w.name) for w in find_widgets(np.asarray(image), [], top=30)]
    assert names == [(60, 600, "add"), (240, 600, "back"), (420, 600, "icon"), (240, 900, "icon")]


_NO_FONT = None if Path(DEJAVU_SANS).is_file() else f"{DEJAVU_SANS} is not installed"


@pytest.mark.skipif(_NO_FONT is not None, reason=str(_NO_FONT))
def test_simdroids_add_alarm_and_navigate_up_are_named_from_its_pixels() -> None:
    from simulators.factory import make_env
    from simulators.sim_env import SimDroidEnvConfig
    from simulators.simdroid.device import SimDroidConfig
    from simulators.simdroid.expert import expert_action
    from simulators.simdroid.tasks import load_tasks

    env: Any = make_env(SimDroidEnvConfig(device=SimDroidConfig().readable(), screenshots=False))
    seen: dict[str, str] = {}
    for kind, page, desc in (
        ("set_alarm", "alarms", "Add alarm"),
        ("set_brightness", "display", "Navigate up"),
    ):
        task = next(t for t in load_tasks("general", "train") if t.kind == kind)
        env.reset(task, seed=1)
        for _ in range(6):
            if env.device.state.page.get("name") == page:
                break
            env.step(expert_action(env.device, task))
        device = env.device
        truth = next(e for e in device.elements() if e.content_desc == desc)
        scale = device.config.screenshot_scale
        for widget in find_widgets(device.screenshot_pixels(), [], top=40):
            cx, cy = (
                (widget.box[0] + widget.box[2]) / 2 / scale,
                (widget.box[1] + widget.box[3]) / 2 / scale,
            )
            x1, y1, x2, y2 = truth.bounds
            if widget.kind == "icon" and x1 <= cx < x2 and y1 <= cy < y2:
                seen[desc] = widget.name
    assert seen == {"Add alarm": "add", "Navigate up": "back"}
