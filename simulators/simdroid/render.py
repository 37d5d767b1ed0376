"""Pillow rendering of a Screen: flat rectangles and text.

By default text is drawn in Pillow's bitmap font, fast enough for hundreds of frames per second at
the default quarter-size screenshots, but too small and coarse for an OCR model to read. A
``Typeface`` naming a TrueType file (``SimDroidConfig.font``, e.g. Debian's DejaVu Sans) draws
text at a size proportional to the screen instead, which a text detector reads (the screen-only
observation, docs/operations.md).
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from simulators.simdroid.state import DeviceState
from simulators.simdroid.widgets import Screen, Widget

__all__ = [
    "DEJAVU_SANS",
    "Typeface",
    "encode_png",
    "fit_text",
    "render_image",
    "render_png",
    "screen_key",
    "solid_png",
    "to_pixels",
]

INK = (33, 33, 33)
MUTED = (120, 120, 120)
ACCENT = (26, 115, 232)
LINE = (220, 220, 220)
WHITE = (255, 255, 255)

DEJAVU_SANS = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"  # Debian's fonts-dejavu-core
CHAR_W, CHAR_H = 6, 11  # the bitmap font's cell


@dataclass(frozen=True, slots=True)
class Typeface:
    """How text is drawn: ``path`` "" is the bitmap font; else a TrueType file drawn ``px`` tall."""

    path: str = ""
    px: int = CHAR_H


@cache
def _font(face: Typeface) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    if not face.path:
        # the bitmap font needs no FreeType rasterising: several times faster than a TrueType font
        return ImageFont.load_default_imagefont()
    return ImageFont.truetype(face.path, face.px)


def _width(face: Typeface, text: str) -> float:
    return len(text) * CHAR_W if not face.path else _font(face).getlength(text)


def _ascii(text: str) -> str:
    # the bitmap font covers Latin-1 only; anything else would draw as garbage boxes
    return text.encode("latin-1", "replace").decode("latin-1")


def fit_text(text: str, width_px: int, face: Typeface = Typeface()) -> str:
    """``text`` as drawn in a box ``width_px`` wide: cut and ended by ``~`` when it does not fit."""
    if not face.path:
        text = _ascii(text)
    if _width(face, text) <= width_px:
        return text
    keep = len(text) - 1
    while keep > 1 and _width(face, text[:keep] + "~") > width_px:
        keep -= 1
    return text[: max(1, keep)] + "~"


@dataclass(frozen=True, slots=True)
class _Pen:
    draw: ImageDraw.ImageDraw
    face: Typeface

    def text(
        self,
        box: tuple[int, int, int, int],
        text: str,
        fill: tuple[int, int, int] = INK,
        center: bool = False,
    ) -> None:
        x1, y1, x2, y2 = box
        pad = max(3, self.face.px // 4)
        text = fit_text(text, x2 - x1 - 2 * pad + 2, self.face)
        height = self.face.px if self.face.path else CHAR_H
        y = (y1 + y2 - height) // 2
        x = (x1 + x2 - int(_width(self.face, text))) // 2 if center else x1 + pad
        self.draw.text((x, y), text, font=_font(self.face), fill=fill)


def _scaled(bounds: tuple[int, int, int, int], scale: float) -> tuple[int, int, int, int]:
    x1, y1, x2, y2 = bounds
    return (
        int(x1 * scale),
        int(y1 * scale),
        max(int(x1 * scale) + 1, int(x2 * scale) - 1),
        max(int(y1 * scale) + 1, int(y2 * scale) - 1),
    )


Box = tuple[int, int, int, int]


def _label(widget: Widget) -> str:
    return widget.text or widget.content_desc


def _draw_title(pen: _Pen, widget: Widget, state: DeviceState, box: Box) -> None:
    pen.text(box, _label(widget).upper())


def _draw_row(pen: _Pen, widget: Widget, state: DeviceState, box: Box) -> None:
    x1, _, x2, y2 = box
    pen.draw.line((x1, y2, x2, y2), fill=LINE)
    pen.text(box, _label(widget))


def _draw_button(pen: _Pen, widget: Widget, state: DeviceState, box: Box) -> None:
    pen.draw.rectangle(box, fill=widget.color or (232, 240, 254), outline=ACCENT)
    pen.text(box, _label(widget), fill=WHITE if widget.color else ACCENT, center=True)


def _draw_icon(pen: _Pen, widget: Widget, state: DeviceState, box: Box) -> None:
    x1, y1, x2, y2 = box
    side = min(x2 - x1, y2 - y1) * 3 // 5
    cx = (x1 + x2) // 2
    pen.draw.rectangle((cx - side // 2, y1 + 2, cx + side // 2, y1 + 2 + side), fill=widget.color or MUTED)
    caption = widget.text or ("<" if "up" in _label(widget).lower() else "+")
    pen.text((x1, y1 + side, x2, y2), caption, center=True)


def _draw_field(pen: _Pen, widget: Widget, state: DeviceState, box: Box) -> None:
    focused = widget.field is not None and state.focus == widget.field
    pen.draw.rectangle(box, fill=WHITE, outline=ACCENT if focused else MUTED, width=2 if focused else 1)
    value = state.fields.get(widget.field, widget.text) if focused and widget.field else widget.text
    if focused and pen.face.path:
        # Drawn to be read (Typeface): a focused field keeps its hint, as Android's do, and its
        # caret stands apart, so an OCR reads it as a word of its own (`screen.CARET`).
        shown = f"{value or widget.content_desc} |"
    else:
        shown = (value + "|") if focused else (value or widget.content_desc)
    pen.text(box, shown, fill=INK if value else MUTED)


def _draw_switch(pen: _Pen, widget: Widget, state: DeviceState, box: Box) -> None:
    x1, y1, x2, y2 = box
    track = (x2 - (x2 - x1) // 6, (y1 + y2) // 2 - 4, x2 - 4, (y1 + y2) // 2 + 4)
    pen.draw.rectangle(track, fill=ACCENT if widget.checked else LINE)
    knob_x = track[2] - 4 if widget.checked else track[0] + 4
    pen.draw.ellipse((knob_x - 5, track[1] - 2, knob_x + 5, track[3] + 2), fill=WHITE, outline=MUTED)
    pen.draw.line((x1, y2, x2, y2), fill=LINE)
    pen.text((x1, y1, track[0], y2), _label(widget))


def _draw_slider(pen: _Pen, widget: Widget, state: DeviceState, box: Box) -> None:
    x1, y1, x2, y2 = box
    mid = (y1 + y2) // 2
    pen.draw.line((x1, mid, x2, mid), fill=LINE, width=3)
    knob_x = x1 + int((x2 - x1) * (widget.slider_value or 0.0))
    pen.draw.line((x1, mid, knob_x, mid), fill=ACCENT, width=3)
    pen.draw.ellipse((knob_x - 5, mid - 5, knob_x + 5, mid + 5), fill=ACCENT)


def _draw_banner(pen: _Pen, widget: Widget, state: DeviceState, box: Box) -> None:
    pen.draw.rectangle(box, fill=widget.color or ACCENT)
    pen.text(box, _label(widget), fill=WHITE)


def _draw_toast(pen: _Pen, widget: Widget, state: DeviceState, box: Box) -> None:
    pen.draw.rectangle(box, fill=(50, 50, 50))
    pen.text(box, _label(widget), fill=WHITE, center=True)


def _draw_dialog_text(pen: _Pen, widget: Widget, state: DeviceState, box: Box) -> None:
    pen.text(box, _label(widget), fill=INK if widget.style == "dialog_title" else MUTED)


def _draw_plain(pen: _Pen, widget: Widget, state: DeviceState, box: Box) -> None:
    pen.text(box, _label(widget), fill=INK if widget.interactive else MUTED)


_PAINTERS: dict[str, Callable[[_Pen, Widget, DeviceState, Box], None]] = {
    "title": _draw_title,
    "row": _draw_row,
    "button": _draw_button,
    "icon": _draw_icon,
    "field": _draw_field,
    "switch": _draw_switch,
    "slider": _draw_slider,
    "banner": _draw_banner,
    "toast": _draw_toast,
    "dialog": _draw_dialog_text,
    "dialog_title": _draw_dialog_text,
}


def _draw_widget(pen: _Pen, widget: Widget, state: DeviceState, scale: float) -> None:
    painter = _PAINTERS.get(widget.style, _draw_plain)
    painter(pen, widget, state, _scaled(widget.bounds, scale))


def render_png(
    screen: Screen, state: DeviceState, size: tuple[int, int], scale: float, face: Typeface = Typeface()
) -> bytes:
    """The screen as a PNG of ``size`` times ``scale`` pixels, its text drawn in ``face``."""
    return encode_png(render_image(screen, state, size, scale, face))


def render_image(
    screen: Screen, state: DeviceState, size: tuple[int, int], scale: float, face: Typeface = Typeface()
) -> Image.Image:
    """The screen drawn as an RGB image of ``size`` times ``scale`` pixels, its text in ``face``: what
    ``render_png`` encodes, and what the OCR reads as pixels (``to_pixels``) when no PNG is kept."""
    width, height = max(1, int(size[0] * scale)), max(1, int(size[1] * scale))
    image = Image.new("RGB", (width, height), screen.background)
    draw = ImageDraw.Draw(image)
    pen = _Pen(draw, face)
    for widget in screen.underlay:
        _draw_widget(pen, widget, state, scale)
    if screen.modal and screen.widgets:
        # grey the page under the dialog with a stipple: cheaper than alpha compositing
        for y in range(0, height, 2):
            pen.draw.line((0, y, width, y), fill=(150, 150, 150))
        left = min(w.bounds[0] for w in screen.widgets)
        top = min(w.bounds[1] for w in screen.widgets)
        right = max(w.bounds[2] for w in screen.widgets)
        bottom = max(w.bounds[3] for w in screen.widgets)
        pad = int(8 * scale) + 2
        pen.draw.rectangle(
            (
                int(left * scale) - pad,
                int(top * scale) - pad,
                int(right * scale) + pad,
                int(bottom * scale) + pad,
            ),
            fill=WHITE,
            outline=INK,
        )
    for widget in screen.widgets:
        _draw_widget(pen, widget, state, scale)
    bar = max(1, int(size[1] * scale / 40))
    pen.draw.rectangle((0, 0, width, bar), fill=(30, 30, 30))
    if face.path:
        pen.text((0, 0, width, bar), "12:00", fill=WHITE)
    else:
        pen.draw.text((3, max(0, (bar - CHAR_H) // 2)), "12:00", font=_font(face), fill=WHITE)
    return image


def to_pixels(image: Image.Image) -> np.ndarray[Any, Any]:
    """An RGB image's pixels, (height, width, 3) uint8 in RGB order, read-only: the same values a
    decoder reads back from ``encode_png(image)`` (PNG is lossless), without encoding one."""
    pixels = np.asarray(image)
    pixels.setflags(write=False)  # a device hands out its cached frame: nobody may paint on it
    return pixels


def screen_key(
    screen: Screen, state: DeviceState, size: tuple[int, int], scale: float, face: Typeface
) -> bytes:
    """A hash of everything ``render_image`` reads: the screen's background, dialog flag and every
    widget's drawn attributes (what the painters above read), the focused field and its text (the
    only state drawn), the size, the scale and the typeface. Equal keys, equal pixels, so the OCR
    can look a screen up without hashing its 2 MB of pixels, or drawing it. A painter that reads
    something more must add it here (``tests/envs/test_screen_pixels.py`` checks keys and pixels
    agree over a run of screens)."""

    def drawn(widget: Widget) -> tuple[object, ...]:
        return (
            widget.bounds, widget.style, widget.text, widget.content_desc, widget.field,
            widget.checked, widget.slider_value, widget.color, widget.interactive,
        )  # fmt: skip

    focus = state.focus
    inputs = (
        [drawn(w) for w in screen.underlay],
        [drawn(w) for w in screen.widgets],
        screen.background,
        screen.modal,
        (focus, focus in state.fields, state.fields.get(focus or "")),
        size,
        scale,
        face,
    )
    return hashlib.blake2b(repr(inputs).encode(), digest_size=16, person=b"simdroid-screen").digest()


def encode_png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    # level 1: ~3x faster than the default and only slightly larger on flat UI frames
    image.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


@cache
def solid_png(size: tuple[int, int], color: tuple[int, int, int]) -> bytes:
    return encode_png(Image.new("RGB", size, color))
