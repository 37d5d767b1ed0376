"""The OCR's crop cache: a screen read partly from cached crops reads as a fresh OCR of it does,
and the cache stays within its bound (the packaged OCR model; skipped where it is not installed)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from simulators.ocr import OcrConfig, OcrReader, ocr_missing_reason
from simulators.simdroid.device import SimDroid, SimDroidConfig
from simulators.simdroid.render import DEJAVU_SANS


def _missing() -> str | None:
    if not Path(DEJAVU_SANS).is_file():
        return f"{DEJAVU_SANS} is not installed (`make system-deps`: apt-get install fonts-dejavu-core)"
    return ocr_missing_reason()


pytestmark = pytest.mark.skipif(_missing() is not None, reason=str(_missing()))


def _screens() -> tuple[bytes, bytes]:
    """The launcher, and the launcher with its lower half blanked: a second screen that shares
    the first one's upper lines pixel for pixel and lacks the rest."""
    first = SimDroid(SimDroidConfig().readable()).screenshot_png()
    image = Image.open(io.BytesIO(first)).convert("RGB")
    ImageDraw.Draw(image).rectangle((0, image.height // 2, image.width, image.height), fill=(255, 255, 255))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return first, out.getvalue()


def test_a_screen_read_from_cached_crops_reads_as_a_fresh_ocr_of_it() -> None:
    first, second = _screens()
    cached = OcrReader(OcrConfig(cache_screens=0))
    boxes, _ = cached.read(first)
    assert len(boxes) >= 4  # a launcher has several labelled icons
    recognised = cached.recognised
    again, _ = cached.read(second)
    # Most lines were cached crops: the detector boxes a line the same wherever the screen around
    # it changed little (a box a pixel off is another crop, recognised afresh).
    assert cached.recognised - recognised < len(again) / 2
    fresh = OcrReader(OcrConfig(cache_screens=0, cache_crops=0))
    assert again == fresh.read(second)[0]
    assert 0 < len(again) < len(boxes)
    assert cached.read(first)[0] == fresh.read(first)[0] == boxes


def test_the_crop_cache_is_bounded_and_evicted_crops_are_read_again() -> None:
    first, _ = _screens()
    reader = OcrReader(OcrConfig(cache_screens=0, cache_crops=2, cache_bands=0))
    boxes, _ = reader.read(first)
    assert len(reader._crops) == 2 < len(boxes)
    recognised = reader.recognised
    assert reader.read(first)[0] == boxes
    assert reader.recognised > recognised  # the evicted crops were recognised afresh, not guessed


def test_ocr_config_refuses_a_negative_crop_cache() -> None:
    with pytest.raises(ValueError, match="cache_crops"):
        OcrConfig(cache_crops=-1)
