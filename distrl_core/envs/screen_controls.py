"""Controls drawn beside text, found in a screenshot's foreground mask: switches and a text caret.

Two states a policy needs are drawn, not written, so no OCR reads them:

- a **switch** is a short, thick horizontal bar (its track) with a knob at one end that stands out
  above and below it; the knob's end says its state, right for on and left for off, as Android
  and SimDroid draw it (SimDroid also colours an on track with its accent, but a knob's side holds
  on every theme, where colours do not). The knob is found where the track's rows are bordered by
  foreground just above and just below it, in a shape bounded within the track's thickness: the
  middle bar of a bold "E" has its stem above and below it too, but the stem runs on past the
  bar's thickness. An OCR reads an off knob's ring as an "O", if anything;
- the **caret** of a focused field that holds text: the last shape inside the field's frame is one
  thin, solid upright bar that reaches past the text's baseline (a caret spans a line's whole
  height, where an "l" or a "1" ends on the baseline). An OCR reads it as a "1" or a "|" after
  the text ("22 |" as "221"), which ``screen.screen_elements`` strips where the text's last
  character lies over the bar.

Pure numpy on ``screen_widgets``' mask; ``screen_widgets.find_widgets`` calls them. What they
do to the OCR's lines (a switch takes its label's place, a caret's false character is dropped)
is here too, for ``screen.screen_elements``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["Line", "caret_marks", "find_switches", "switch_labels", "text_caret", "without_caret"]

Box = tuple[int, int, int, int]  # x1, y1, x2, y2 in screenshot pixels, x2/y2 exclusive
# An OCR line: its box, its text, and its characters' spans (``screen.TextBox``).
Line = tuple[tuple[float, float, float, float], str, tuple[tuple[float, float], ...]]
# What an OCR reads a caret's bar as, where it lies over the bar (``without_caret``).
CARET_READINGS = frozenset("|1lIij!/\\[]")


def find_switches(
    fg: np.ndarray[Any, Any], length: tuple[float, float], thickness: tuple[float, float]
) -> list[tuple[Box, bool]]:
    """(box, on) of each switch of the (H, W) foreground mask ``fg``: a track ``length`` long and
    ``thickness`` thick (fractions of the width) whose knob sits at one end. The box spans the
    track and the knob."""
    width = fg.shape[1]
    shortest, longest = length[0] * width, length[1] * width
    thinnest, thickest = max(3, round(thickness[0] * width)), max(4, round(thickness[1] * width))
    rows = _rows_with_runs(fg, max(1, int(np.ceil(shortest))))
    if not len(rows):
        return []
    # Every run of foreground on those rows, as (row, start, end): a track is a stack of equal runs.
    edges = np.diff(fg[rows].view(np.int8), axis=1, prepend=np.int8(0), append=np.int8(0))
    which, at = np.nonzero(edges)
    starts, ends, ys = at[::2], at[1::2], rows[which[::2]]
    keep = (ends - starts >= shortest) & (ends - starts <= longest)
    found: list[tuple[Box, bool]] = []
    for y1, y2, a, b in _stacks(ys[keep], starts[keep], ends[keep]):
        if thinnest <= y2 - y1 <= thickest and b - a >= 1.5 * (y2 - y1):
            switch = _knobbed(fg, y1, y2, a, b)
            if switch is not None:
                found.append(switch)
    return found


def _rows_with_runs(mask: np.ndarray[Any, Any], n: int) -> np.ndarray[Any, Any]:
    """Indices of the rows of ``mask`` that may hold a run of at least ``n`` True, a superset:
    any 15 consecutive columns hold one whole byte of the packed row, so a row with no byte of
    all ones holds no such run. Text rows, the most, seldom hold one, so the exact runs are then
    listed on the few rows left."""
    if n >= 15:
        full: np.ndarray[Any, Any] = (np.packbits(mask, axis=1) == 255).any(axis=1)
        return np.flatnonzero(full)
    return np.flatnonzero(np.count_nonzero(mask, axis=1) >= n)


def _stacks(ys: np.ndarray[Any, Any], starts: np.ndarray[Any, Any], ends: np.ndarray[Any, Any]) -> list[Box]:
    """(y1, y2, a, b) of each stack of runs (row, start, end; in row order) on consecutive rows
    with about the same ends (a knob's outline adds a pixel or two to a track's rows): rows y1..y2
    (exclusive), and the columns a..b that every one of its runs covers. In array passes: a
    launcher's icons alone make a thousand runs."""
    n = len(ys)
    if not n:
        return []
    index = np.arange(n)
    first, last = np.searchsorted(ys, ys - 1, "left"), np.searchsorted(ys, ys - 1, "right")
    link = index.copy()  # each run's run on the row above, itself where none continues it
    for k in range(int((last - first).max())):
        j = np.minimum(first + k, n - 1)
        near = (np.abs(starts - starts[j]) <= 2) & (np.abs(ends - ends[j]) <= 2)
        hit = (first + k < last) & (link == index) & near
        link[hit] = j[hit]
    while True:  # pointer jumping: each run to its stack's first run
        up = link[link]
        if np.array_equal(up, link):
            break
        link = up
    order = np.argsort(link, kind="stable")
    heads = np.flatnonzero(np.concatenate(([True], link[order][1:] != link[order][:-1])))
    y1 = ys[link[order][heads]]
    y2 = np.maximum.reduceat(ys[order], heads) + 1
    a = np.maximum.reduceat(starts[order], heads)
    b = np.minimum.reduceat(ends[order], heads)
    return list(zip(y1.tolist(), y2.tolist(), a.tolist(), b.tolist(), strict=True))


def _knobbed(fg: np.ndarray[Any, Any], y1: int, y2: int, a: int, b: int) -> tuple[Box, bool] | None:
    """The switch whose track is rows y1..y2 by columns a..b, if one knob borders it at one end:
    (its box, whether the knob is at the right end)."""
    height, width = fg.shape
    thick = y2 - y1
    reach = max(2, thick // 3)
    if y1 < thick or y2 + thick > height:
        return None
    # A bar, not a slice of a solid shape: the rows just outside it are mostly background.
    if fg[y1 - 1, a:b].mean() > 0.5 or fg[y2, a:b].mean() > 0.5:
        return None
    c0, c1 = max(0, a - 2 * thick), min(width, b + 2 * thick)
    knob = fg[y1 - reach : y1, c0:c1].any(axis=0) & fg[y2 : y2 + reach, c0:c1].any(axis=0)
    runs = np.flatnonzero(np.diff(np.concatenate(([0], knob.view(np.int8), [0]))))
    if len(runs) != 2:  # exactly one knob
        return None
    k1, k2 = c0 + int(runs[0]), c0 + int(runs[1])
    if not 2 <= k2 - k1 <= 2.5 * thick:
        return None
    # The knob stands out by the same few rows above and below, with nothing further out.
    column = np.asarray(fg[y1 - thick : y2 + thick, k1:k2].any(axis=1))
    up = _flush(column[:thick][::-1])
    down = _flush(column[thick + thick :])
    if up is None or down is None or min(up, down) < 1 or abs(up - down) > max(1, thick // 4):
        return None
    x1, x2 = min(a, k1), max(b, k2)
    centre = (k1 + k2) / 2
    if min(centre - x1, x2 - centre) > 1.5 * thick:  # a knob mid-track is a slider's, not a switch's
        return None
    box = (max(0, x1 - 1), y1 - up, min(width, x2 + 1), y2 + down)
    return box, centre > (x1 + x2) / 2


def _flush(outward: np.ndarray[Any, Any]) -> int | None:
    """How many rows, from the track outward, are foreground before the first background one, or
    None when foreground follows that background (something beyond the knob) or never ends."""
    gaps = np.flatnonzero(~outward)
    if not len(gaps):
        return None
    first = int(gaps[0])
    return None if outward[first:].any() else first


def text_caret(
    fg: np.ndarray[Any, Any], text: Box, frame: Box, max_wide: float, min_tall: float
) -> Box | None:
    """The caret after a text inside a field's frame, if its last shape is one: the box of a solid
    upright bar at most ``max_wide`` pixels wide and at least ``min_tall`` of the frame's inner
    height tall, reaching below the text's baseline. Looked for from the text box's left to the
    frame's inner right side (an OCR box may stop short of the caret)."""
    fx1, fy1, fx2, fy2 = frame
    x1, y1 = max(text[0], fx1 + 3), max(text[1], fy1 + 3)
    x2, y2 = fx2 - 3, min(text[3], fy2 - 3)
    if x2 - x1 < 2 or y2 - y1 < 4:
        return None
    region = fg[y1:y2, x1:x2]
    cols = np.flatnonzero(region.any(axis=0))
    if not len(cols):
        return None
    last = int(cols[-1]) + 1
    start = last
    while start > 0 and region[:, start - 1].any():
        start -= 1
    rows = np.flatnonzero(region[:, start:last].any(axis=1))
    r1, r2 = int(rows[0]), int(rows[-1]) + 1
    if last - start > max_wide or r2 - r1 < min_tall * (fy2 - fy1 - 6):
        return None
    if region[r1:r2, start:last].mean() < 0.8:
        return None
    before = region[:, :start]
    shown = before.any(axis=0)
    if shown.any():
        # Most columns of the text end on its baseline: the median column bottom (and top).
        tall = len(before)
        bottoms = tall - 1 - np.argmax(before[::-1, shown], axis=0)
        tops = np.argmax(before[:, shown], axis=0)
        if r2 - 1 < np.median(bottoms) + max(1.0, 0.1 * (r2 - r1)) or r1 > np.median(tops) + 1:
            return None
    return x1 + start, y1 + r1, x1 + last, y1 + r2


def caret_marks(texts: list[Line], carets: Sequence[Box]) -> set[int]:
    """The indices of ``texts`` that a caret ends (a caret's bar, ``WidgetBox`` "caret", on the
    text's row, inside its box or just right of it: an OCR box may stop short of the caret), each
    text rewritten in place without the character the OCR read the caret as, if it read one
    (``without_caret``)."""
    marked: set[int] = set()
    for bar in carets:
        cx, cy = (bar[0] + bar[2]) / 2, (bar[1] + bar[3]) / 2
        reach = bar[3] - bar[1]  # a caret stands about a space right of the text at most
        near = [
            (cx - box[2] if cx > box[2] else 0.0, i)
            for i, (box, _, _) in enumerate(texts)
            if box[1] <= cy <= box[3] and box[0] <= cx <= box[2] + reach
        ]
        if near:
            i = min(near)[1]
            box, text, spans = texts[i]
            texts[i] = (box, without_caret(text, spans, cx), spans)
            marked.add(i)
    return marked


def without_caret(text: str, spans: Sequence[tuple[float, float]], caret_x: float) -> str:
    """``text`` without its last character where that character is one a caret reads as and its
    span (``screen.TextBox.spans``, one a character but spaces) lies over the caret at column ``caret_x``;
    else ``text`` as read: a typed "21" ends in a "1" that is no caret, and its span says so."""
    chars = [c for c in text if not c.isspace()]
    if not chars or len(spans) != len(chars) or chars[-1] not in CARET_READINGS:
        return text
    x1, x2 = spans[-1]
    if len(spans) > 1 and spans[-2][1] > caret_x:  # the caret lies over the character before too
        return text
    if not x1 - 1 <= caret_x <= x2 + 1:
        return text
    return text[: text.rstrip().rfind(chars[-1])].rstrip()


def switch_labels(texts: list[Line], switches: Sequence[Box]) -> dict[Box, str]:
    """Each switch's label: the nearest text left of it on its row (its vertical centre within one
    switch height of the switch's rows), as a settings row and SimDroid's alarm list draw it. That
    text, and any read over the switch itself, is blanked in ``texts``: the switch's element takes
    its place."""
    labels: dict[Box, str] = {}
    for sx1, sy1, sx2, sy2 in switches:
        h = sy2 - sy1
        best: tuple[float, int] | None = None
        for i, ((x1, y1, x2, y2), text, spans) in enumerate(texts):
            cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
            if sx1 <= cx < sx2 and sy1 <= cy < sy2:
                texts[i] = ((x1, y1, x2, y2), "", spans)
            elif text and x2 <= sx1 + 2 and sy1 - h <= cy <= sy2 + h and (best is None or x2 > best[0]):
                best = (x2, i)
        if best is not None:
            box, text, spans = texts[best[1]]
            labels[(sx1, sy1, sx2, sy2)] = text
            texts[best[1]] = (box, "", spans)
    return labels
