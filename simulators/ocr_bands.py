"""A screenshot cut into horizontal bands of content, each read on its own (pure numpy).

A phone screen is mostly flat background: rows of one colour separate its text lines, icons and
bars. The OCR (``simulators.ocr``) reads each band between such rows as a small image of its own,
which is what makes its readings reusable: a band is a function of its pixels alone, so a band
seen on any earlier screen (the previous screen's unchanged rows, a list scrolled by a few rows, a
title bar every page of an app shares) is looked up by a hash of its pixels instead of read again,
and a changed screen pays for its changed bands only. The detector also skips the flat rows, which
a full-screen pass convolves for nothing.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

__all__ = ["Band", "Pixels", "band_key", "text_bands", "to_stride", "with_margin"]

Pixels = np.ndarray[Any, Any]
Band = tuple[int, int]  # rows [top, bottom) of the screenshot, flat border rows included


def text_bands(pixels: Pixels, min_gap: int) -> list[Band]:
    """The bands of an (H, W, 3) image: runs of rows that are not flat (one colour across), split
    where at least ``min_gap`` flat rows lie between two runs, each with the flat row above and
    below it (where the image has them).

    Shorter flat runs do not split: a text line can hold a flat row of its own (between the dot
    and the stem of an ``i`` on a line of ``i``s, inside ``=``), a few pixels high at most, and a
    line cut in two would read as two wrong halves. A dimmed page under a dialog (a stipple of flat
    grey rows every other row) stays whole for the same reason."""
    if pixels.shape[0] == 0:
        return []
    # A row is flat when its bytes repeat with the period of one pixel: one contiguous comparison
    # (~0.3 ms for 540x1200), where comparing each pixel with the row's first (a broadcast) is ~100x slower.
    rows = np.ascontiguousarray(pixels).reshape(pixels.shape[0], -1)
    step = pixels.shape[2] if pixels.ndim == 3 else 1
    flat = (rows[:, step:] == rows[:, :-step]).all(axis=1)
    busy = np.flatnonzero(~flat)
    if busy.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(busy) > min_gap)
    starts = [int(busy[0]), *(int(y) for y in busy[breaks + 1])]
    ends = [*(int(y) + 1 for y in busy[breaks]), int(busy[-1]) + 1]
    height = pixels.shape[0]
    # The flat rows around a band are its context: the detector sees the band as it would on the
    # screen, a margin of the background colour, never the next band's pixels.
    return [(max(0, top - 1), min(height, bottom + 1)) for top, bottom in zip(starts, ends, strict=True)]


def band_key(pixels: Pixels) -> bytes:
    """A hash of an image's pixels and shape: equal keys, equal images (the same bytes laid out in
    another width are another image)."""
    data = np.ascontiguousarray(pixels)
    return hashlib.blake2b(data.tobytes(), digest_size=16, person=repr(data.shape).encode()[:16]).digest()


def with_margin(band: Pixels, rows: int) -> Pixels:
    """``band`` with ``rows`` copies of its top row above it and of its bottom row below it: its own
    flat border rows, so the detector sees background around the band's content, as on the screen,
    without reading what lies beyond it."""
    return np.pad(band, ((rows, rows), (0, 0), (0, 0)), mode="edge")


def to_stride(image: Pixels, multiple: int = 32) -> Pixels:
    """``image`` with its last row and column repeated until both sides are multiples of
    ``multiple``: the detector's input size must be (its stride), and repeating the border adds
    background instead of stretching the text, so a band reads at the screen's scale."""
    height, width = image.shape[:2]
    return np.pad(image, ((0, -height % multiple), (0, -width % multiple), (0, 0)), mode="edge")
