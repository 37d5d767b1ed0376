"""The OCR read band by band: how a screenshot is cut (pure numpy), and, with the packaged OCR model
(skipped where it is not installed), that a screen read partly from cached bands and crops reads
exactly as a full OCR of it with no cache does, on SimDroid screens in sequence and on a screen
after a small change, with the band cache within its bound."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

from distrl_core.envs.screen import screen_elements
from simulators.ocr import OcrConfig, OcrReader, ocr_missing_reason
from simulators.ocr_bands import band_key, text_bands, to_stride, with_margin
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from simulators.simdroid.device import SimDroid, SimDroidConfig
from simulators.simdroid.expert import expert_action
from simulators.simdroid.render import DEJAVU_SANS
from simulators.simdroid.tasks import load_tasks


def _missing() -> str | None:
    if not Path(DEJAVU_SANS).is_file():
        return f"{DEJAVU_SANS} is not installed (`make system-deps`: apt-get install fonts-dejavu-core)"
    return ocr_missing_reason()


needs_ocr = pytest.mark.skipif(_missing() is not None, reason=str(_missing()))


def _image(rows: list[int], height: int = 40, width: int = 12) -> np.ndarray:
    """A white image with a black pixel in each of ``rows`` (at a column that varies by row)."""
    image = np.full((height, width, 3), 255, dtype=np.uint8)
    for y in rows:
        image[y, y % width] = 0
    return image


def test_bands_split_at_runs_of_flat_rows_and_keep_their_border_rows() -> None:
    image = _image([5, 6, 7, 20, 21, 39])
    # Rows 8-19 (12 flat rows) and 22-38 (17) split; each band has the flat row above and below.
    assert text_bands(image, min_gap=4) == [(4, 9), (19, 23), (38, 40)]
    # A flat run shorter than the gap (the middle of an `=`) does not cut a line in two.
    assert text_bands(_image([5, 6, 9, 10]), min_gap=4) == [(4, 12)]
    assert text_bands(_image([5, 6, 9, 10]), min_gap=2) == [(4, 8), (8, 12)]


def test_a_flat_image_has_no_bands_and_a_row_of_two_colours_is_not_flat() -> None:
    assert text_bands(np.zeros((30, 8, 3), dtype=np.uint8), min_gap=4) == []
    image = np.zeros((30, 8, 3), dtype=np.uint8)
    image[10, 4:] = (0, 0, 1)  # one channel of half the row differs
    assert text_bands(image, min_gap=4) == [(9, 12)]


def test_the_detector_input_repeats_the_border_rows_to_the_stride() -> None:
    band = _image([1], height=3, width=40)
    padded = to_stride(with_margin(band, 5))
    assert padded.shape == (32, 64, 3)
    assert (padded[:5, :40] == band[0]).all() and (padded[8:] == padded[8, 0]).all()
    assert band_key(band) != band_key(band.reshape(3, 20, 6))  # same bytes, another image
    assert band_key(band) == band_key(band.copy())


def _sequence() -> list[bytes]:
    """Screens the scripted expert passes through on a few General tasks, in order: the launcher,
    app pages, a search typed into a field letter by letter (a small change between screens)."""
    env = SimDroidEnv(SimDroidEnvConfig(device=SimDroidConfig().readable(), screenshots=True, ui_xml=False))
    kinds = ("web_search", "toggle_setting")
    tasks = [next(t for t in load_tasks("general", "train") if t.kind == kind) for kind in kinds]
    shots: list[bytes] = []
    for task in tasks:
        observation = env.reset(task, seed=3)
        for _ in range(4):
            assert observation.screenshot_png is not None
            shots.append(observation.screenshot_png)
            result = env.step(expert_action(env, task))
            observation = result.observation
            if result.done:
                break
    return shots


@needs_ocr
def test_screens_read_from_cached_bands_read_as_a_full_ocr_of_each() -> None:
    shots = _sequence()
    assert len(set(shots)) >= 5
    incremental = OcrReader(OcrConfig(cache_screens=0))
    full = OcrReader(OcrConfig(cache_screens=0, cache_crops=0, cache_bands=0))
    size = SimDroid(SimDroidConfig().readable()).size
    for png in shots:
        cached, shot = incremental.read(png)
        fresh, _ = full.read(png)
        assert cached == fresh
        assert screen_elements(cached, shot, size) == screen_elements(fresh, shot, size)
    assert sum(len(full.read(png)[0]) for png in shots) > 4 * len(shots)  # screens with text
    # Bands recur from screen to screen (the launcher, a page's bars, a field's unchanged rows).
    assert incremental.bands_read < full.bands_read / 2


def _changed(png: bytes) -> bytes:
    """``png`` with one label painted over: one band changes, the rest stay pixel for pixel."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    bands = text_bands(np.asarray(image), OcrConfig().band_gap)
    top, bottom = bands[len(bands) // 2]
    ImageDraw.Draw(image).rectangle((0, top + 1, image.width // 2, bottom - 2), fill=(255, 255, 255))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


@needs_ocr
def test_a_changed_screen_detects_only_its_changed_band_and_reads_as_a_full_ocr() -> None:
    first = SimDroid(SimDroidConfig().readable()).screenshot_png()
    second = _changed(first)
    reader = OcrReader(OcrConfig(cache_screens=0))
    boxes, _ = reader.read(first)
    detected = reader.bands_read
    again, _ = reader.read(second)
    assert reader.bands_read - detected <= 2  # the painted band (split in two at most)
    full = OcrReader(OcrConfig(cache_screens=0, cache_crops=0, cache_bands=0))
    assert again == full.read(second)[0]
    assert again != boxes and 0 < len(again) < len(boxes) + 2


@needs_ocr
def test_the_band_cache_is_bounded_and_evicted_bands_are_detected_again() -> None:
    first = SimDroid(SimDroidConfig().readable()).screenshot_png()
    reader = OcrReader(OcrConfig(cache_screens=0, cache_bands=2))
    boxes, _ = reader.read(first)
    assert len(reader._bands) == 2 < reader.bands_read
    detected = reader.bands_read
    assert reader.read(first)[0] == boxes
    assert reader.bands_read > detected  # evicted bands were read afresh, not guessed


def test_ocr_config_refuses_a_negative_band_cache_and_a_zero_gap() -> None:
    with pytest.raises(ValueError, match="cache_bands"):
        OcrConfig(cache_bands=-1)
    with pytest.raises(ValueError, match="band_gap"):
        OcrConfig(band_gap=0)
