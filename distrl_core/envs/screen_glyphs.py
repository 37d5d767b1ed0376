"""A text-less icon named by its glyph's shape: "add" for a plus, "back" for a left chevron.

Under the screen observation every icon button that draws no text used to be ``ImageButton
"icon"``, so a policy could not tell the Clock's *Add alarm* from a page's *Navigate up*; the UI
dump names them by their content description. Phone UIs draw a small set of flat, single-colour
glyphs for such buttons (Material's add, arrow_back, chevron_left, close, menu, search, settings),
and a glyph is recognised here by its shape alone, with a few explainable features that hold at any
scale, stroke width and colour:

- **where the glyph is**: what the icon's fill encloses (a white plus on a coloured button: pixels
  unlike the fill's commonest colour that do not touch the box's edge), else, for a solid shape
  such as SimDroid's grey square, the small unread mark just under it (SimDroid draws its "+" or
  "<" there, and an OCR reads no text in it);
- **stroke glyphs** (plus, cross, chevrons, arrows, three bars) are matched to a skeleton of line
  segments laid out in the glyph's own ink box, which is scaled to the glyph whatever its size or
  aspect: the glyph is that skeleton when nearly all its ink lies within half a stroke (plus a
  tolerance of a tenth of its size) of some segment, and ink lies near nearly every point of every
  segment (a one-way match would take a plus for a minus, or any blob for a plus);
- **ring glyphs**: a hole (background that the ink encloses) up and left of the glyph's centre with
  ink in its lower right corner is a magnifier ("search"); a centred hole whose outline's distance
  from the hole's centre rises and falls five or more times around it is a gear ("settings").

Anything else, or a glyph too small to judge, keeps the generic "icon" (:data:`UNSURE`): a wrong
name would mislead a policy more than none. Pure numpy, no bitmap of any one UI's glyphs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["GLYPH_NAMES", "UNSURE", "classify_glyph", "icon_glyph", "icon_name"]

UNSURE = "icon"

# Skeletons in the unit box (u right, v down): segments ((u1, v1), (u2, v2)), named as people and
# Android's content descriptions name such buttons, and the range of width/height they allow.
_Segment = tuple[tuple[float, float], tuple[float, float]]
_SKELETONS: dict[str, tuple[tuple[_Segment, ...], tuple[float, float]]] = {
    "add": ((((0.0, 0.5), (1.0, 0.5)), ((0.5, 0.0), (0.5, 1.0))), (0.6, 1.6)),
    "close": ((((0.0, 0.0), (1.0, 1.0)), ((1.0, 0.0), (0.0, 1.0))), (0.6, 1.6)),
    "back": ((((1.0, 0.0), (0.0, 0.5)), ((0.0, 0.5), (1.0, 1.0))), (0.25, 1.3)),
    "forward": ((((0.0, 0.0), (1.0, 0.5)), ((1.0, 0.5), (0.0, 1.0))), (0.25, 1.3)),
    "back arrow": (
        (((0.0, 0.5), (1.0, 0.5)), ((0.0, 0.5), (0.45, 0.0)), ((0.0, 0.5), (0.45, 1.0))),
        (0.7, 1.6),
    ),
    "menu": ((((0.0, 0.0), (1.0, 0.0)), ((0.0, 0.5), (1.0, 0.5)), ((0.0, 1.0), (1.0, 1.0))), (0.8, 2.5)),
}
GLYPH_NAMES = ("add", "back", "close", "forward", "menu", "search", "settings")
PRECISION = 0.9  # of the glyph's ink near the skeleton
COVERAGE = 0.85  # of each segment's sampled points with ink near them
MIN_SIDE = 5  # pixels: a smaller mark is a dot or noise, too small to read a shape from


def icon_name(
    packed: np.ndarray[Any, Any], blank: np.ndarray[Any, Any], box: tuple[int, int, int, int]
) -> str:
    """The name of the icon at ``box`` by its glyph (:func:`icon_glyph`, :func:`classify_glyph`),
    or :data:`UNSURE`."""
    glyph = icon_glyph(packed, blank, box)
    return UNSURE if glyph is None else classify_glyph(glyph)


def icon_glyph(
    packed: np.ndarray[Any, Any], blank: np.ndarray[Any, Any], box: tuple[int, int, int, int]
) -> np.ndarray[Any, Any] | None:
    """The icon's glyph as a bool mask cropped to its ink, or None where none is seen.

    ``packed``: (H, W) one quantised colour per pixel; ``blank``: (H, W) foreground with the OCR's
    text boxes blanked; ``box``: the icon's ``(x1, y1, x2, y2)``, x2/y2 exclusive. The glyph is
    what the icon's fill encloses, else the mark right under the icon (no wider than a third more
    than it, no taller than it), as SimDroid draws a solid square with its glyph beneath."""
    x1, y1, x2, y2 = box
    region = packed[y1:y2, x1:x2]
    values, counts = np.unique(region, return_counts=True)
    inner = _enclosed(region != values[np.argmax(counts)])
    if inner.sum() >= MIN_SIDE:
        return _crop(inner)
    w, h = x2 - x1, y2 - y1
    zx1, zx2 = max(0, x1 - w // 3), min(blank.shape[1], x2 + w // 3)
    zone = blank[y2 + 1 : min(blank.shape[0], y2 + 1 + h), zx1:zx2]
    if not zone.any():
        return None
    # The first mark under the icon, down to the first empty row after it (not a row further down).
    rows = np.flatnonzero(zone.any(axis=1))
    gaps = np.flatnonzero(np.diff(rows) > 1)
    mark = zone[rows[0] : (rows[gaps[0]] if len(gaps) else rows[-1]) + 1]
    cols = np.flatnonzero(mark.any(axis=0))
    if cols[0] == 0 or cols[-1] == zone.shape[1] - 1:  # it runs past the zone: a rule or a row's edge
        return None
    return _crop(mark)


def classify_glyph(glyph: np.ndarray[Any, Any]) -> str:
    """The name of a glyph (bool mask, True = ink, cropped to its ink), or :data:`UNSURE`."""
    h, w = glyph.shape
    if max(h, w) < MIN_SIDE or glyph.sum() < MIN_SIDE:
        return UNSURE
    holes = _enclosed(~np.pad(glyph, 1))[1:-1, 1:-1]
    if holes.sum() >= 0.03 * h * w:
        return _ring_name(glyph, holes)
    stroke = _stroke(glyph)
    if stroke > max(3, 0.4 * min(h, w)):  # a blob, not strokes: any skeleton fits its box loosely
        return UNSURE
    ys, xs = np.nonzero(glyph)
    # Of the skeletons the glyph passes, the closest: a small chevron also passes the cross's test
    # loosely (its two strokes run near the cross's left half), never as closely.
    fits = [
        (fit, name)
        for name, (segments, (low, high)) in _SKELETONS.items()
        if low <= w / h <= high and (fit := _fit(xs, ys, glyph, segments, stroke)) is not None
    ]
    if not fits:
        return UNSURE
    name = min(fits)[1]
    return "back" if name == "back arrow" else name


def _fit(
    xs: np.ndarray[Any, Any],
    ys: np.ndarray[Any, Any],
    glyph: np.ndarray[Any, Any],
    segments: tuple[_Segment, ...],
    stroke: int,
) -> float | None:
    """How far the ink (``xs``, ``ys``) lies from ``segments`` and they from it (the mean distances
    both ways, in pixels), or None when it fails the module docstring's test: ink mostly near the
    skeleton and near every segment's points.

    The unit box is laid over the ink box shrunk by half a stroke on each side, where the strokes'
    centre lines end."""
    h, w = glyph.shape
    half = stroke / 2
    ox, oy = half - 0.5, half - 0.5
    sx, sy = max(1.0, w - stroke), max(1.0, h - stroke)
    reach = half + 0.1 * max(w, h) + 0.5
    nearest = np.full(len(xs), np.inf)
    covered: list[np.ndarray[Any, Any]] = []
    for (u1, v1), (u2, v2) in segments:
        ax, ay, bx, by = ox + u1 * sx, oy + v1 * sy, ox + u2 * sx, oy + v2 * sy
        nearest = np.minimum(nearest, _distance(xs, ys, ax, ay, bx, by))
        # Coverage: points along the segment, each with its distance to the nearest ink.
        t = np.linspace(0.0, 1.0, 12)
        px, py = ax + t * (bx - ax), ay + t * (by - ay)
        d = np.sqrt(((xs[None, :] - px[:, None]) ** 2 + (ys[None, :] - py[:, None]) ** 2).min(axis=1))
        if (d <= reach).mean() < COVERAGE:
            return None
        covered.append(d)
    if (nearest <= reach).mean() < PRECISION:
        return None
    return float(nearest.mean() + np.concatenate(covered).mean())


def _distance(
    xs: np.ndarray[Any, Any], ys: np.ndarray[Any, Any], ax: float, ay: float, bx: float, by: float
) -> np.ndarray[Any, Any]:
    """Each point's distance to the segment from (ax, ay) to (bx, by)."""
    dx, dy = bx - ax, by - ay
    length2 = dx * dx + dy * dy or 1.0
    t = np.clip(((xs - ax) * dx + (ys - ay) * dy) / length2, 0.0, 1.0)
    return np.asarray(np.hypot(xs - (ax + t * dx), ys - (ay + t * dy)))


def _ring_name(glyph: np.ndarray[Any, Any], holes: np.ndarray[Any, Any]) -> str:
    """A glyph with a hole: a magnifier (hole up-left, ink in the lower-right corner), a gear (hole
    centred, five or more teeth around it) or unsure (a ring, a letter "o")."""
    h, w = glyph.shape
    hy, hx = (float(c.mean()) for c in np.nonzero(holes))
    dx, dy = (hx - (w - 1) / 2) / w, (hy - (h - 1) / 2) / h
    corner = glyph[2 * h // 3 :, 2 * w // 3 :]
    if dx < -0.08 and dy < -0.08 and corner.mean() > 0.1:
        return "search"
    if abs(dx) < 0.06 and abs(dy) < 0.06 and _teeth(glyph, hx, hy) >= 5:
        return "settings"
    return UNSURE


def _teeth(glyph: np.ndarray[Any, Any], cx: float, cy: float, bins: int = 72) -> int:
    """How many times the outline's distance from (cx, cy) rises above the midpoint of its range,
    going round: a gear's teeth; 0 for an outline rounder than a tenth of its radius."""
    ys, xs = np.nonzero(glyph)
    angle = ((np.arctan2(ys - cy, xs - cx) + math.pi) / (2 * math.pi) * bins).astype(int) % bins
    radius = np.zeros(bins)
    np.maximum.at(radius, angle, np.hypot(xs - cx, ys - cy))
    if (radius == 0).any() or radius.max() - radius.min() < 0.1 * radius.max():
        return 0
    high = radius > (radius.max() + radius.min()) / 2
    return int(np.count_nonzero(high & ~np.roll(high, 1)))


def _stroke(glyph: np.ndarray[Any, Any]) -> int:
    """The glyph's stroke width: twice the erosions (4-neighbour) that empty it, at least 1."""
    mask, steps = glyph.copy(), 0
    while mask.any():
        padded = np.pad(mask, 1)
        mask = mask & padded[:-2, 1:-1] & padded[2:, 1:-1] & padded[1:-1, :-2] & padded[1:-1, 2:]
        steps += 1
    return max(1, 2 * steps - 1)


def _enclosed(mask: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The True pixels of ``mask`` not 4-connected to its border: a flood from the border, grown a
    pixel a step (glyphs are a few dozen pixels across, so a few dozen steps)."""
    reach = np.zeros_like(mask)
    reach[0], reach[-1], reach[:, 0], reach[:, -1] = mask[0], mask[-1], mask[:, 0], mask[:, -1]
    while True:
        padded = np.pad(reach, 1)
        grown = mask & (reach | padded[:-2, 1:-1] | padded[2:, 1:-1] | padded[1:-1, :-2] | padded[1:-1, 2:])
        if (grown == reach).all():
            break
        reach = grown
    enclosed: np.ndarray[Any, Any] = mask & ~reach
    return enclosed


def _crop(mask: np.ndarray[Any, Any]) -> np.ndarray[Any, Any] | None:
    """``mask`` cut to the box of its True pixels, None if it has none."""
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    if not len(rows):
        return None
    cropped: np.ndarray[Any, Any] = mask[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]
    return cropped
