"""The screen observation without a PNG: SimDroid's drawn pixels and a phone's raw ``screencap``
frame handed to the OCR, which must read exactly what it reads from the PNG of the same screen;
the raw frame's parser; the fault model's corrupt frames in pixel form; and that an environment
keeping no screenshot never encodes a PNG."""

from __future__ import annotations

import io
import struct
from dataclasses import replace
from pathlib import Path

import adbutils
import numpy as np
import pytest
from PIL import Image

from simulators.adb.config import AdbEnvConfig
from simulators.adb.link import AdbDeviceLink
from simulators.factory import make_env
from simulators.fake_adb import FakeAdbServer
from simulators.ocr import OcrConfig, OcrReader, _decode, ocr_missing_reason
from simulators.screen_env import ScreenEnv
from simulators.screen_frames import RawScreencapError, encode_screencap, is_blank, parse_screencap
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from simulators.simdroid import render
from simulators.simdroid.device import FaultConfig, SimDroid, SimDroidConfig
from simulators.simdroid.expert import expert_action
from simulators.simdroid.tasks import get_task, load_tasks


def _missing() -> str | None:
    if not Path(render.DEJAVU_SANS).is_file():
        return (
            f"{render.DEJAVU_SANS} is not installed (`make system-deps`: apt-get install fonts-dejavu-core)"
        )
    return ocr_missing_reason()


needs_ocr = pytest.mark.skipif(_missing() is not None, reason=str(_missing()))


def _rgb(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def _screens() -> list[tuple[bytes, np.ndarray, bytes]]:
    """(PNG, pixels, key) of the screens the scripted expert passes through on two General tasks:
    the launcher, app pages, a field typed into letter by letter, the same screen again."""
    env = SimDroidEnv(SimDroidEnvConfig(device=SimDroidConfig().readable(), screenshots=False, ui_xml=False))
    kinds = ("web_search", "toggle_setting")
    tasks = [next(t for t in load_tasks("general", "train") if t.kind == kind) for kind in kinds]
    device = env.device
    shots = []
    for task in tasks:
        env.reset(task, seed=3)
        for _ in range(4):
            lazy = device.screenshot_pixels(lazy=True)
            assert callable(lazy)  # not drawn yet: drawn only when called
            pixels = device.screenshot_pixels()
            assert isinstance(pixels, np.ndarray) and device.screenshot_pixels(lazy=True) is pixels
            shots.append((device.screenshot_png(), pixels, device.screen_key()))
            if env.step(expert_action(env, task)).done:
                break
    return shots


def test_simdroid_pixels_are_its_png_decoded_and_equal_keys_mean_equal_pixels() -> None:
    shots = _screens()
    assert len({key for _, _, key in shots}) >= 5
    by_key: dict[bytes, np.ndarray] = {}
    for png, pixels, key in shots:
        assert pixels.dtype == np.uint8 and pixels.shape == (1200, 540, 3) and not pixels.flags.writeable
        assert np.array_equal(pixels, _rgb(png))  # RGB, the PNG's values exactly
        assert np.array_equal(_decode(png), pixels[:, :, ::-1])  # what the OCR decodes is BGR
        assert np.array_equal(by_key.setdefault(key, pixels), pixels)
    # The same screen reached again has the same key; a fresh device on the same state agrees.
    device = SimDroid(SimDroidConfig().readable())
    device.load_task(get_task("general-train-0000"))
    again = SimDroid(SimDroidConfig().readable())
    again.load_task(get_task("general-train-0000"))
    assert device.screen_key() == again.screen_key()
    device.start_app("com.android.settings")
    device.keyevent("HOME")  # back on the launcher: another state (history), the same pixels
    assert device.screen_key() == again.screen_key()
    assert np.array_equal(device.screenshot_pixels(), again.screenshot_pixels())
    device.start_app("com.android.settings")
    assert device.screen_key() != again.screen_key()
    smaller = SimDroid(SimDroidConfig().readable(scale=0.25))
    smaller.load_task(get_task("general-train-0000"))
    assert smaller.screen_key() != again.screen_key()  # another scale draws other pixels


def test_corrupt_frames_in_pixel_form_and_the_env_retries_them() -> None:
    config = SimDroidConfig(faults=FaultConfig(corrupt_screenshot_prob=1.0, seed=1)).readable()
    device = SimDroid(config)
    device.load_task(get_task("general-train-0000"))
    kinds = set()
    for _ in range(40):
        shot = device.screenshot_pixels()
        if shot is None:
            kinds.add("truncated")  # a failed capture: no pixel form
            continue
        assert isinstance(shot, np.ndarray) and shot.shape == (1200, 540, 3) and is_blank(shot)
        kinds.add("white" if (shot == 255).all() else "black")
    assert kinds == {"truncated", "white", "black"}
    # Every capture bad: the env gives up after its retries with an all-black frame, not ok.
    env = SimDroidEnv(SimDroidEnvConfig(device=config, screenshots=False, screenshot_retries=3))
    env.reset("general-train-0000", seed=1)
    frame = env.screen_pixels()
    assert (frame.ok, frame.key, frame.pixels.shape) == (False, None, (1200, 540, 3))  # type: ignore[union-attr]
    assert not np.asarray(frame.pixels).any()
    # Half the captures bad: a retry gets the real screen, keyed.
    flaky = replace(config, faults=FaultConfig(corrupt_screenshot_prob=0.5, seed=2))
    env = SimDroidEnv(SimDroidEnvConfig(device=flaky, screenshots=False, screenshot_retries=8))
    env.reset("general-train-0000", seed=1)
    clean = SimDroid(SimDroidConfig().readable())
    clean.restore(env.device.snapshot())
    expected = clean.screenshot_pixels()
    for _ in range(10):
        frame = env.screen_pixels()
        assert frame.ok and frame.key == env.device.screen_key() == clean.screen_key()
        pixels = frame.pixels() if callable(frame.pixels) else frame.pixels
        assert np.array_equal(pixels, expected)
    assert env.device.faults.counts["corrupt_screenshots"] > 0


def test_is_blank_is_one_colour_black_or_white_only() -> None:
    assert is_blank(np.zeros((4, 3, 3), np.uint8)) and is_blank(np.full((4, 3, 3), 255, np.uint8))
    assert not is_blank(np.full((4, 3, 3), 128, np.uint8))  # grey is a screen, not a dead frame
    dot = np.zeros((4, 3, 3), np.uint8)
    dot[2, 1] = (0, 0, 1)  # corners alike, one pixel differs
    assert not is_blank(dot)


def _frame(width: int = 3, height: int = 2) -> np.ndarray:
    return np.arange(width * height * 3, dtype=np.uint8).reshape(height, width, 3)


def test_raw_screencap_parses_with_either_header() -> None:
    pixels = _frame()
    new, old = encode_screencap(pixels), encode_screencap(pixels, colour_space=False)
    assert struct.unpack_from("<4I", new) == (3, 2, 1, 1) and len(new) == 16 + 3 * 2 * 4
    assert struct.unpack_from("<3I", old) == (3, 2, 1) and len(old) == 12 + 3 * 2 * 4
    for raw in (new, old):
        assert np.array_equal(parse_screencap(raw), pixels)
    # BGRA_8888 (5) comes back as RGB; RGBX_8888 (2) ignores its padding byte.
    bgra = struct.pack("<3I", 1, 1, 5) + bytes([10, 20, 30, 255])
    assert parse_screencap(bgra).tolist() == [[[30, 20, 10]]]
    assert parse_screencap(struct.pack("<3I", 1, 1, 2) + bytes([10, 20, 30, 0])).tolist() == [[[10, 20, 30]]]


def test_a_raw_frame_of_the_wrong_length_or_format_is_a_clear_error() -> None:
    raw = encode_screencap(_frame())
    with pytest.raises(RawScreencapError, match=r"3x2 is a 12- or 16-byte header and 24 bytes .* got 20"):
        parse_screencap(raw[:20])  # truncated
    with pytest.raises(RawScreencapError, match="got 41"):
        parse_screencap(raw + b"\0")
    with pytest.raises(RawScreencapError, match="got 5 bytes"):
        parse_screencap(raw[:5])
    with pytest.raises(RawScreencapError, match="pixel format 4"):
        parse_screencap(struct.pack("<3I", 1, 1, 4) + b"\0" * 4)  # RGB_565 is not 4 bytes a pixel
    with pytest.raises(RawScreencapError, match="holds no pixels"):
        parse_screencap(struct.pack("<3I", 0, 5, 1))


@pytest.mark.parametrize("sdk", ["34", "27"])  # a 16-byte header from Android 9 on, 12 before
def test_the_fake_server_serves_raw_screencap_and_the_link_reads_it(
    fake_adb: FakeAdbServer, sdk: str
) -> None:
    served = fake_adb.device("emulator-5554")
    served.properties["ro.build.version.sdk"] = sdk
    phone = served.phone
    raw = (
        adbutils.AdbClient("127.0.0.1", fake_adb.port)
        .device("emulator-5554")
        .shell("screencap", encoding=None)
    )
    width, height = phone.shot_size
    assert len(raw) == (16 if sdk == "34" else 12) + width * height * 4
    expected = _rgb(phone.screenshot_png())
    assert np.array_equal(parse_screencap(raw), expected)
    link = AdbDeviceLink(AdbEnvConfig(port=fake_adb.port, serial="emulator-5554", retry_delay_s=0.0))
    link.connect()
    assert np.array_equal(link.screenshot_pixels(), expected)


@needs_ocr
def test_the_ocr_reads_pixels_exactly_as_it_reads_the_png_of_them() -> None:
    shots = _screens()
    from_png = OcrReader(OcrConfig(cache_screens=0))
    from_pixels = OcrReader(OcrConfig(cache_screens=0))
    keyed = OcrReader()
    for png, pixels, key in shots:
        boxes = from_png.read(png)
        assert from_pixels.read_pixels(pixels) == boxes
        rgba = np.dstack([pixels, np.full(pixels.shape[:2], 255, np.uint8)])
        assert from_pixels.read_pixels(rgba) == boxes  # a raw frame's alpha is ignored
        assert keyed.read_pixels(lambda p=pixels: p, key) == boxes  # type: ignore[misc]
    assert sum(len(from_png.read(png)[0]) for png, _, _ in shots) > 4 * len(shots)  # screens with text
    hits = keyed.screen_hits
    _, pixels, key = shots[0]

    def never() -> np.ndarray:
        raise AssertionError("a screen read before is not drawn again")

    assert keyed.read_pixels(never, key) == from_png.read(shots[0][0])
    assert keyed.screen_hits == hits + 1
    with pytest.raises(ValueError, match="only with a key"):
        keyed.read_pixels(never)


@needs_ocr
def test_a_screen_env_keeping_no_screenshot_encodes_no_png_and_reads_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    task = get_task("general-train-0000")
    reader = OcrReader()

    def play(keep: bool) -> list[tuple[str, ...]]:
        env = make_env(SimDroidEnvConfig(observation="screen", screenshots=keep, ui_xml=False, seed=4))
        assert isinstance(env, ScreenEnv)
        env = ScreenEnv(env.env, reader, keep_screenshots=keep)
        observation = env.reset(task, seed=4)
        seen = []
        for _ in range(3):
            assert (observation.screenshot_png is not None) == keep
            assert observation.extras["screenshot_ok"]
            seen.append(tuple(e.text for e in observation.elements))
            result = env.step(expert_action(env.env, task))
            observation = result.observation
            if result.done:
                break
        return seen

    with_png = play(True)

    def no_png(image: Image.Image) -> bytes:
        raise AssertionError("a PNG was encoded that nobody keeps")

    monkeypatch.setattr(render, "encode_png", no_png)
    assert play(False) == with_png and any(with_png)
