"""Screenshots as pixel arrays, for the screen observation when no PNG is kept (pure numpy).

When the shards do not keep screenshots, nobody needs a PNG: SimDroid hands the OCR the pixels it
drew and a phone hands over ``screencap``'s raw frame (no ``-p``), which saves the device its PNG
encoding, the slowest part of a capture, and the OCR its decoding.

A raw ``screencap`` frame is a little-endian header, then the pixels row by row, 4 bytes each::

    width u32, height u32, format u32 [, colour space u32]   # the last word since Android 9
    pixels: width * height * 4 bytes

The header is 12 bytes before Android 9 (API 28) and 16 from it on; which one a frame has is told
by its length, since both are followed by exactly ``width * height * 4`` bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

__all__ = ["PixelFrame", "RawScreencapError", "encode_screencap", "is_blank", "parse_screencap"]

Pixels = np.ndarray[Any, Any]

# Android's PixelFormat codes screencap writes: 4 bytes a pixel, alpha (or padding) last.
RGBA_8888, RGBX_8888, BGRA_8888 = 1, 2, 5
SRGB = 1  # ui::Dataspace's colour-space word for sRGB, what an Android >= 9 emulator writes


class PixelFrame(NamedTuple):
    """A screenshot as pixels, what an environment's ``screen_pixels()`` returns.

    - ``pixels``: (height, width, 3) uint8, RGB order; or, with a ``key``, a function returning
      them, called only if the OCR has not read that key before (a screen never drawn twice).
    - ``key``: bytes that identify exactly what was drawn (equal keys, equal pixels), so the OCR's
      screen cache need not hash the pixels; None where no such key is known (a phone's frame).
    - ``ok``: False when every capture failed or was blank (``observation.extras["screenshot_ok"]``).
    """

    pixels: Pixels | Callable[[], Pixels]
    key: bytes | None
    ok: bool


class RawScreencapError(ValueError):
    """Bytes that are not a raw ``screencap`` frame."""


def is_blank(pixels: Pixels) -> bool:
    """Whether a frame is one colour, all black or all white: a frame grabbed with the display off
    or mid-transition (``simulators.adb.frames``), never a real screen (which has a status bar)."""
    first = pixels[0, 0]
    if not (first == pixels[-1, -1]).all():  # a screen's corners differ: no full pass in the usual case
        return False
    if int(first.min()) not in (0, 255) or int(first.min()) != int(first.max()):
        return False
    return not (pixels != first).any()


def parse_screencap(raw: bytes) -> Pixels:
    """The RGB pixels of a raw ``screencap`` frame (header of 12 or 16 bytes, told by the length).

    Raises RawScreencapError, saying what was wrong, for a frame too short for its header, a length
    that fits neither header for the size it states (a truncated frame), or an unknown format."""
    if len(raw) < 12:
        raise RawScreencapError(f"a raw screencap frame has a 12- or 16-byte header; got {len(raw)} bytes")
    width, height, pixel_format = struct.unpack_from("<3I", raw)
    body = width * height * 4
    if len(raw) == 16 + body:
        header = 16
    elif len(raw) == 12 + body:
        header = 12
    else:
        raise RawScreencapError(
            f"a raw screencap frame of {width}x{height} is a 12- or 16-byte header and {body} bytes of "
            f"pixels ({12 + body} or {16 + body} bytes); got {len(raw)} (truncated, or not a raw frame)"
        )
    if pixel_format not in (RGBA_8888, RGBX_8888, BGRA_8888):
        raise RawScreencapError(
            f"raw screencap pixel format {pixel_format} is not 4-byte RGBA, RGBX or BGRA (1, 2 or 5)"
        )
    if width == 0 or height == 0:
        raise RawScreencapError(f"a raw screencap frame of {width}x{height} holds no pixels")
    pixels = np.frombuffer(raw, np.uint8, body, header).reshape(height, width, 4)
    return pixels[:, :, 2::-1] if pixel_format == BGRA_8888 else pixels[:, :, :3]


def encode_screencap(pixels: Pixels, colour_space: bool = True) -> bytes:
    """RGB pixels as ``screencap`` writes them raw (RGBA_8888, opaque): with the colour-space word
    as Android 9 and later write it, or without as older releases do."""
    height, width = pixels.shape[:2]
    rgba = np.empty((height, width, 4), np.uint8)
    rgba[:, :, :3] = pixels[:, :, :3]
    rgba[:, :, 3] = 255
    header = (
        struct.pack("<4I", width, height, RGBA_8888, SRGB)
        if colour_space
        else struct.pack("<3I", width, height, RGBA_8888)
    )
    return header + rgba.tobytes()
