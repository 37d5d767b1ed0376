"""Widgets that draw no text, found in a screenshot's pixels: sliders, icon buttons, empty fields.

An OCR reads text only, so under the screen observation a slider (a track and a knob) and an icon
button (a filled shape whose glyph, such as "+", reads as nothing) never became elements, and no
policy could act on them: brightness and "add an alarm" tasks were unsolvable from the screen.
Every phone draws these widgets the same way, as flat shapes on a flat background, so a few cheap
array passes find them without any model:

- the background is estimated from the image itself: the most common colour of the whole screen
  and of each band of rows (a banner or a dialog has its own); a pixel that differs from both by
  more than its low bits (``shift``) in some channel is foreground;
- a **slider** is a long (at least ``slider_width`` of the screen's width), thin (at most
  ``slider_height`` of the width, in rows) horizontal run of foreground rows crossed by a knob:
  foreground just above and just below the run in one column. A full-width separator under a list
  row is as long and thin but has no knob, so it is never a slider;
- an **icon** is a compact blob left when the text boxes are blanked out (a recursive cut along
  empty rows and columns): roughly square, its side within ``icon_side`` of the screen's width,
  mostly filled, overlapping no text box, and with no text box right under it (a launcher icon's
  caption is that app's element already); it is named by its glyph's shape
  (``distrl_core.envs.screen_glyphs``: a plus is "add", a left chevron "back");
- an empty **text field** is a wide frame, as tall as an icon, that holds no text an OCR read (a
  field with no hint, such as the Clock's minute box, reads as no text, and so may a one-character
  value, "7 |"); it is focused when its last shape is its text caret: one thin upright bar (an
  OCR reads a lone caret as nothing, so the caret seen in the pixels is what says that typing
  goes there);
- a **switch** (a short thick track with a knob at one end) and the **caret** after the text of
  a framed field are drawn beside text: ``distrl_core.envs.screen_controls`` finds them;
- a **modal** dialog's panel over a page dimmed by its scrim: ``distrl_core.envs.screen_modal``
  finds it, and the screen observation keeps only what lies inside it.

Pure numpy, pixels and text boxes in, boxes out, in the screenshot's pixels; a SimDroid screen of
540x1200 takes a few milliseconds. ``distrl_core.envs.screen.screen_elements`` makes elements of
them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from distrl_core.envs.screen_controls import find_switches, text_caret
from distrl_core.envs.screen_glyphs import icon_name
from distrl_core.envs.screen_modal import find_modal

__all__ = ["WidgetBox", "WidgetConfig", "find_widgets"]

WidgetKind = Literal["slider", "icon", "field", "switch", "caret", "modal"]
Box = tuple[int, int, int, int]  # x1, y1, x2, y2 in screenshot pixels, x2/y2 exclusive


@dataclass(frozen=True, slots=True)
class WidgetBox:
    """One widget found: its kind and its box (``x1, y1, x2, y2``, x2/y2 exclusive) in screenshot
    pixels. A slider's box spans its track's columns (a tap at a fraction of it sets that fraction)
    and its knob's rows; a switch's, its track and knob; a caret's, the bar after a field's text
    (the text box it ends is that field). ``focused``: an empty field showing its text caret.
    ``checked``: a switch whose knob is at its track's right end (on). ``name``: an icon's name by
    its glyph's shape (``screen_glyphs``: "add", "back", ...; "icon" when unsure). ``unread``: where
    an empty-looking field's frame holds ink that no OCR box covers, its caret left out (a
    one-character value such as "9", which the text detector passes over), for a recogniser to
    read (``simulators.ocr``); None where there is none."""

    kind: WidgetKind
    box: Box
    focused: bool = False
    checked: bool = False
    name: str = ""
    unread: Box | None = None


@dataclass(frozen=True)
class WidgetConfig:
    """Thresholds of :func:`find_widgets`, as fractions of the screenshot's width (so they hold
    at any screenshot scale) unless said otherwise.

    - ``shift``: low bits of each channel ignored when colours are compared (in 0..7): pale
      surfaces (a white field on an off-white page) stay background, anti-aliasing blurs nothing.
    - ``band``: rows per background band, as a fraction of the width.
    - ``slider_width``: a slider's track is at least this long.
    - ``slider_height``: a track is at most this many rows thick (12 px on a 540 px screenshot).
    - ``icon_side``: an icon's shorter and longer sides lie within this range.
    - ``icon_fill``: at least this fraction of an icon's box is foreground (a solid shape, not an
      outline such as a text field's frame).
    - ``field_width``: an empty text field's frame is at least this wide (and as tall as an icon).
    - ``caret``: a focused field's caret is at most this wide and at least this fraction of
      the field's inner height tall (SimDroid's: 2 px by 19 of 60 rows on a 540 px screenshot).
    - ``switch_length``: a switch's track is this long (SimDroid's: 0.04 of the width in the
      Clock's alarm list, 0.15 on a settings page; a slider's track is longer).
    - ``switch_thickness``: a switch's track is this thick (SimDroid's: 9 rows on a 540 px
      screenshot; a slider's 3 rows are thinner).
    """

    shift: int = 4
    band: float = 0.03
    slider_width: float = 0.3
    slider_height: float = 0.022
    icon_side: tuple[float, float] = (0.04, 0.25)
    icon_fill: float = 0.6
    field_width: float = 0.15
    caret: tuple[float, float] = (0.008, 0.2)
    switch_length: tuple[float, float] = (0.035, 0.2)
    switch_thickness: tuple[float, float] = (0.007, 0.045)


def find_widgets(
    pixels: np.ndarray[Any, Any],
    text_boxes: Sequence[tuple[float, float, float, float]],
    top: int = 0,
    config: WidgetConfig = WidgetConfig(),
) -> list[WidgetBox]:
    """Sliders, switches, icons, fields and carets of a screenshot, top to bottom.

    ``pixels``: (height, width, 3 or 4) uint8, RGB or BGR alike (only equality of colours counts).
    ``text_boxes``: the OCR's boxes ``(x1, y1, x2, y2)`` in the same pixels. ``top``: rows above
    this (the status bar) are ignored."""
    height, width = pixels.shape[:2]
    if height < 8 or width < 8:
        return []
    fg, packed = _foreground(pixels[:, :, :3], config)  # (H, W) bool, (H, W) one colour a pixel
    fg[: max(0, top)] = False
    texts = [
        _clip((int(x1), int(y1), int(np.ceil(x2)), int(np.ceil(y2))), width, height)
        for x1, y1, x2, y2 in text_boxes
    ]
    sliders = _sliders(fg, texts, config)
    # Before any text is blanked: an OCR may read a switch's knob as an "O" and box it.
    switches = [
        WidgetBox("switch", box, checked=on)
        for box, on in find_switches(fg, config.switch_length, config.switch_thickness)
    ]
    blank = fg.copy()
    for x1, y1, x2, y2 in texts + [w.box for w in sliders + switches]:
        blank[y1:y2, x1:x2] = False
    shapes: list[WidgetBox] = []
    for box in _blobs(blank):
        if _is_icon(box, blank, texts, width, config):
            shapes.append(WidgetBox("icon", box, name=icon_name(packed, blank, box)))
        elif _is_frame(box, fg, blank, width, config):
            inside = [t for t in texts if _overlap(box, t)]
            wide = max(2, config.caret[0] * width)
            if not inside:  # an OCR may read a one-character value ("7 |") as nothing
                caret = text_caret(fg, box, box, wide, config.caret[1])
                shapes.append(WidgetBox("field", box, caret is not None, unread=_unread(blank, box, caret)))
            for text in inside:
                caret = text_caret(fg, text, box, wide, config.caret[1])
                if caret is not None:
                    shapes.append(WidgetBox("caret", caret))
    # A dialog's panel over a dimmed page: only what lies inside it can be tapped (screen_modal).
    modal = find_modal(pixels, top)
    if modal is not None:
        shapes.append(WidgetBox("modal", modal))
    return sorted(sliders + switches + shapes, key=lambda w: (w.box[1], w.box[0]))


def _foreground(
    rgb: np.ndarray[Any, Any], config: WidgetConfig
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(H, W) bool: pixels unlike both the screen's commonest colour and their band's; and each
    pixel's quantised colour as one integer (H, W), which an icon's glyph is found in.

    Colours are compared with ``config.shift`` low bits of each channel dropped (12-bit colours at
    4): one integer compare a pixel, and a white field on an off-white page stays background."""
    height, width = rgb.shape[:2]
    bits = 8 - config.shift
    q = rgb >> config.shift  # (H, W, 3) uint8
    packed = q[:, :, 0].astype(np.uint16) << (2 * bits)  # (H, W) uint16: one colour a pixel
    packed |= q[:, :, 1].astype(np.uint16) << bits
    packed |= q[:, :, 2]
    band = max(2, round(config.band * width))
    bands = -(-height // band)
    colours = 1 << (3 * bits)
    # Every fourth column suffices for a band's commonest colour: a histogram per band.
    keys = (np.arange(height)[:, None] // band) * colours + packed[:, ::4].astype(np.int64)  # (H, W/4)
    counts = np.bincount(keys.ravel(), minlength=bands * colours).reshape(bands, colours)
    screen_mode = int(np.argmax(counts.sum(axis=0)))
    row_mode = np.repeat(np.argmax(counts, axis=1), band)[:height, None]  # (H, 1)
    fg: np.ndarray[Any, Any] = (packed != row_mode) & (packed != screen_mode)
    return fg, packed


def _clip(box: Box, width: int, height: int) -> Box:
    x1, y1, x2, y2 = box
    return max(0, x1), max(0, y1), min(width, x2), min(height, y2)


def _runs(flags: np.ndarray[Any, Any]) -> list[tuple[int, int]]:
    """(start, end) of each run of True in a 1-d bool array, end exclusive."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], flags.view(np.int8), [0]))))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))


def _sliders(fg: np.ndarray[Any, Any], texts: list[Box], config: WidgetConfig) -> list[WidgetBox]:
    """Thin long runs of foreground rows crossed by a knob, not inside a text box."""
    height, width = fg.shape
    min_len, max_rows = config.slider_width * width, max(3, round(config.slider_height * width))
    # Each row's longest run of foreground, only for rows with enough foreground to hold one.
    rows = np.flatnonzero(np.count_nonzero(fg, axis=1) >= min_len)  # (R,)
    index = np.arange(width)
    last_gap = np.maximum.accumulate(np.where(fg[rows], -1, index), axis=1)  # (R, W)
    run = index - last_gap  # (R, W): length of the run of foreground ending at each column
    ends = np.argmax(run, axis=1)  # (R,)
    lengths = run[np.arange(len(rows)), ends]
    longest = {
        int(y): (int(e - n + 1), int(e + 1))
        for y, e, n in zip(rows, ends, lengths, strict=True)
        if n >= min_len
    }
    found: list[WidgetBox] = []
    for y1, y2 in _runs(np.isin(np.arange(height), list(longest))):
        if y2 - y1 > max_rows or y1 < 2 or y2 + 2 > height:
            continue
        a = max(longest[y][0] for y in range(y1, y2))  # the columns every row of the track covers
        b = min(longest[y][1] for y in range(y1, y2))
        if b - a < min_len:
            continue
        # The knob: a column of the track with foreground two rows above and two rows below it.
        knob = np.asarray(fg[y1 - 2 : y1, a:b].all(axis=0) & fg[y2 : y2 + 2, a:b].all(axis=0))  # (b - a,)
        if not knob.any():
            continue
        x1, x2 = min(longest[y][0] for y in range(y1, y2)), max(longest[y][1] for y in range(y1, y2))
        k1, k2 = _runs(knob)[0]
        column = fg[:, a + (k1 + k2) // 2]  # the knob's middle column
        top, bottom = y1, y2  # widened to the knob's rows
        while top > 0 and y1 - top < max_rows and column[top - 1]:
            top -= 1
        while bottom < height and bottom - y2 < max_rows and column[bottom]:
            bottom += 1
        box = (x1, top, x2, bottom)
        if not any(_overlap(box, t) for t in texts):
            found.append(WidgetBox("slider", box))
    return found


def _blobs(mask: np.ndarray[Any, Any], limit: int = 400) -> list[Box]:
    """Tight boxes of the mask's blobs, by cutting along empty rows and columns until no region
    splits (an XY cut: on a flat UI, shapes apart are separated by a gap). At most ``limit``
    regions are examined, bounding the cost of a noisy screen (a photo)."""
    height, width = mask.shape
    todo: list[Box] = [(0, 0, width, height)]
    leaves: list[Box] = []
    while todo and len(leaves) + len(todo) <= limit:
        x1, y1, x2, y2 = todo.pop()
        region = mask[y1:y2, x1:x2]
        rows = _runs(np.asarray(region.any(axis=1)))
        if not rows:
            continue
        cols = _runs(np.asarray(region[rows[0][0] : rows[-1][1]].any(axis=0)))
        if len(rows) > 1:
            todo += [(x1, y1 + a, x2, y1 + b) for a, b in rows]
        elif len(cols) > 1:
            todo += [(x1 + a, y1 + rows[0][0], x1 + b, y1 + rows[0][1]) for a, b in cols]
        else:
            leaves.append((x1 + cols[0][0], y1 + rows[0][0], x1 + cols[0][1], y1 + rows[0][1]))
    return leaves


def _is_icon(
    box: Box, mask: np.ndarray[Any, Any], texts: list[Box], width: int, config: WidgetConfig
) -> bool:
    """Square enough, sized like an icon, mostly filled, clear of text, with no caption under it."""
    x1, y1, x2, y2 = box
    w, h = x2 - x1, y2 - y1
    low, high = config.icon_side[0] * width, config.icon_side[1] * width
    if not (low <= min(w, h) and max(w, h) <= high and max(w, h) <= 2 * min(w, h)):
        return False
    if mask[y1:y2, x1:x2].mean() < config.icon_fill:
        return False
    if any(_overlap(box, t) for t in texts):
        return False
    # A caption: a text box starting within half the icon's height below it, under its centre.
    cx = (x1 + x2) / 2
    return not any(t[0] <= cx < t[2] and y2 - 2 <= t[1] <= y2 + h / 2 for t in texts)


def _is_frame(
    box: Box, fg: np.ndarray[Any, Any], blank: np.ndarray[Any, Any], width: int, config: WidgetConfig
) -> bool:
    """A text field's frame: wide, row-high, its four sides drawn (in ``fg``: an OCR box may reach
    over a side) and its inside empty once text is blanked (``blank``) but for a caret. One that
    holds no text is an empty field (a field showing text or a hint is that text's element)."""
    x1, y1, x2, y2 = box
    w, h = x2 - x1, y2 - y1
    if w < config.field_width * width or not config.icon_side[0] * width <= h <= config.icon_side[1] * width:
        return False
    sides = (fg[y1, x1:x2], fg[y2 - 1, x1:x2], fg[y1:y2, x1], fg[y1:y2, x2 - 1])
    return (
        min(float(side.mean()) for side in sides) >= 0.9
        and blank[y1 + 3 : y2 - 3, x1 + 3 : x2 - 3].mean() <= 0.02
    )


def _unread(blank: np.ndarray[Any, Any], frame: Box, caret: Box | None) -> Box | None:
    """Where an empty-looking field holds ink that no OCR box read, or None: the ink's columns
    widened by a quarter of the frame's height each side (a recogniser needs some margin) but
    stopping short of the caret, over the frame's inner rows (the caret reaches past the value's
    baseline there, as ``text_caret`` looks for)."""
    x1, y1, x2, y2 = frame
    right = caret[0] - 1 if caret is not None else x2 - 3
    inner = blank[y1 + 3 : y2 - 3, x1 + 3 : right]
    cols = np.flatnonzero(inner.any(axis=0))
    if not len(cols):
        return None
    pad = max(2, (y2 - y1) // 4)
    return (
        max(x1 + 3, x1 + 3 + int(cols[0]) - pad),
        y1 + 3,
        min(right, x1 + 4 + int(cols[-1]) + pad),
        y2 - 3,
    )


def _overlap(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
