"""A modal dialog's panel, found in a screenshot: what lies outside it is under the scrim.

A phone shows a dialog over the page it interrupts, with the page dimmed by a scrim (Android:
black at about 30-60 % alpha; SimDroid: a grey stipple). The page's text under the scrim stays
readable, so an OCR reads it as if it were on top, while a tap there reaches nothing: the dialog
takes every touch until it is dismissed. The UI dump shows the dialog's window alone. Without this,
the screen observation offers every dimmed label of the page as a tap candidate beside the
dialog's two buttons, and a policy that taps its target app under a permission prompt wastes its
steps, where on the tree it reads only the dialog.

The panel is found from the light levels alone (no colours, so RGB and BGR alike): the screen is
averaged over small square blocks (a stipple of alternate rows averages out), and a block is
*dimmed* when it is clearly darker than the screen's light surfaces. A scrim dims whole rows above
and below the panel, and the margins left and right of it on the panel's own rows; a page's own
darker parts (a coloured title bar, a bottom bar, a grey background behind cards) do not do both,
and a page whose light surfaces reach the screen's edges on some row has no scrim there.

Pure numpy; ``screen_widgets.find_widgets`` calls it and reports the panel as a ``modal`` widget,
and ``screen.screen_elements`` keeps only what lies inside it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["find_modal"]

Box = tuple[int, int, int, int]  # x1, y1, x2, y2 in screenshot pixels, x2/y2 exclusive

# A block is dimmed below this fraction of the light level (a 2-row stipple of grey 150 over white
# averages 0.79; a 30 % black scrim 0.7); a page's pale greys (a card's background) stay above it.
DIMMED = 0.86
# ... and above this one, on a scrim's rows: a scrim dims a light page, it does not make it dark.
SCRIM_FLOOR = 0.3
FULL_ROW = 0.9  # a scrim's row is dimmed across at least this share of its blocks


def find_modal(pixels: np.ndarray[Any, Any], top: int = 0) -> Box | None:
    """The box of a modal dialog's panel in ``pixels`` ((H, W, 3 or 4) uint8), or None when no
    scrim is seen. ``top``: rows above it (the status bar) are ignored.

    The panel is the tallest run of block rows whose first and last blocks are dimmed (the scrim's
    side margins) but not the whole row, with rows dimmed across the screen right above it and
    right below it (or the screen's bottom); its columns are those mostly light on its rows."""
    width = pixels.shape[1]
    k = max(2, round(width / 135))  # 4 px blocks on a 540 px screenshot
    k += k % 2  # even, so a stipple of alternate rows averages out in every block
    # Every other column is enough for a block's light level (rows all count: a stipple is of rows);
    # the channels' sum, not their mean, keeps it in integers (the thresholds are ratios).
    light = pixels[max(0, top) :, ::2, :3].sum(axis=2, dtype=np.uint16)
    height = light.shape[0]
    rows, cols = height // k, width // k
    if rows < 8 or cols < 8:
        return None
    half = k // 2
    blocks = light[: rows * k, : cols * half].reshape(rows, k, cols, half).mean(axis=(1, 3))
    level = float(np.percentile(blocks, 90))  # the light surfaces: the panel's, or the page's
    if level < 3 * 64:  # a dark screen: no light panel to tell from a scrim
        return None
    dimmed = blocks < DIMMED * level
    # A scrim's rows: dimmed across, and not dark (a dimmed light page, not a black band).
    scrim = (dimmed.mean(axis=1) >= FULL_ROW) & (np.median(blocks, axis=1) >= SCRIM_FLOOR * level)
    sided = dimmed[:, 0] & dimmed[:, -1] & ~scrim
    best: tuple[int, int] | None = None
    start = None
    for r in range(rows + 1):
        if r < rows and sided[r]:
            start = r if start is None else start
            continue
        if start is not None:
            above = start >= 2 and scrim[start - 2 : start].all()
            below = r == rows or scrim[r : min(rows, r + 2)].all()
            if above and below and r - start >= 3 and (best is None or r - start > best[1] - best[0]):
                best = (start, r)
            start = None
    if best is None:
        return None
    first, end = best
    light_cols = np.flatnonzero((~dimmed[first:end]).mean(axis=0) >= 0.5)
    if not len(light_cols) or (light_cols[-1] + 1 - light_cols[0]) < 0.3 * cols:
        return None
    return (
        int(light_cols[0]) * k,
        max(0, top) + first * k,
        min(width, (int(light_cols[-1]) + 1) * k),
        max(0, top) + end * k,
    )
