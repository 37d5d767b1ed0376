"""Checks that a ``screencap -p`` frame is a usable picture of the screen.

Emulators under load hand out truncated PNGs, and a frame grabbed while the display is off or mid-
transition is a flat black (or white) rectangle. Such a frame would teach a vision policy nothing and a
model judge could call it anything, so the environment retries and finally raises ScreenshotError.
"""

from __future__ import annotations

import io

from PIL import Image, ImageStat, UnidentifiedImageError

# A frame is "blank" when its brightness barely varies: real screens always carry a status bar or text.
BLANK_STDDEV = 2.0
BLACK_MEAN = 10.0
WHITE_MEAN = 245.0
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def frame_problem(png: bytes) -> str | None:
    """None for a good frame, else a short reason: "not a PNG", "truncated PNG", "all black"..."""
    if not png.startswith(PNG_SIGNATURE):
        return f"not a PNG ({len(png)} bytes, starts with {png[:8]!r})"
    try:
        with Image.open(io.BytesIO(png)) as image:
            image.load()  # decodes every row: a truncated file fails here, not in open()
            gray = image.convert("L")
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        return f"undecodable PNG ({error})"
    stats = ImageStat.Stat(gray)
    mean, stddev = stats.mean[0], stats.stddev[0]
    if stddev < BLANK_STDDEV and mean < BLACK_MEAN:
        return "all-black frame"
    if stddev < BLANK_STDDEV and mean > WHITE_MEAN:
        return "all-white frame"
    return None
