"""SimDroid: a deterministic Android-like device that speaks in pixels and Android terms.

The fake ADB server maps ADB shell commands onto these methods and ``SimDroidEnv`` maps Actions
onto them, so both exercise the same device. Behaviour worth knowing:

- Tapping a text field focuses it and selects its text (like Chrome's URL bar), so the next
  ``input_text`` replaces it; later ``input_text`` calls append. Without focus, typing does nothing.
- ENTER submits the focused field; BACK dismisses a dialog, else hides the keyboard (clears
  focus), else goes back a page; HOME dismisses dialogs and shows the launcher; DEL deletes.
- A long press acts as a tap (no app here has long-press menus). A swipe shorter than
  ``TAP_SLOP_PX`` is a tap; a swipe starting on a slider drags it; other swipes go to the screen
  (the launcher pages left/right).
- Distractor dialogs appear after page changes with ``SimDroidConfig.distractor_prob``, from an RNG
  reseeded by ``load_task`` so an episode is reproducible from (config seed, episode seed, task).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, overload

import numpy as np
from PIL import Image

from distrl_core.envs.observation import UIElement, elements_to_xml
from distrl_core.envs.protocol import Task
from simulators.simdroid import render as draw
from simulators.simdroid.apps_system import launch
from simulators.simdroid.catalog import LAUNCHER, find_app
from simulators.simdroid.faults import DeviceOffline, FaultConfig, FaultModel, ResetFailed
from simulators.simdroid.render import DEJAVU_SANS, Typeface, solid_png
from simulators.simdroid.screens import build_screen, maybe_show_distractor
from simulators.simdroid.state import DeviceState
from simulators.simdroid.success import is_successful as _is_successful
from simulators.simdroid.widgets import Screen

__all__ = ["DeviceOffline", "FaultConfig", "ResetFailed", "SimDroid", "SimDroidConfig", "UnknownPackage"]

KEY_NAMES = {"HOME": 3, "BACK": 4, "ENTER": 66, "DEL": 67}
TAP_SLOP_PX = 24
READABLE_SCALE = 0.5  # screenshots half the screen's size: an OCR reads them, at 1/4 of full cost
Pixels = np.ndarray[Any, Any]
_UNTYPEABLE = re.compile(r"[\x00-\x1f\x7f]")  # `adb shell input text` cannot send control chars


class UnknownPackage(ValueError):
    """start_app was given a package that is not installed."""


@dataclass
class SimDroidConfig:
    """Device settings.

    - ``width``/``height``: logical screen size in pixels (what ``wm size`` reports); both >= 100.
    - ``screenshot_scale``: screenshots are rendered at width*scale x height*scale, in (0, 1].
    - ``distractor_prob``: chance that a dialog pops up after each page change, in [0, 1].
    - ``seed``: base seed of the distractor RNG.
    - ``faults``: latency and fault injection, all off by default.
    - ``font``: "" draws text in Pillow's bitmap font (fast; too small for an OCR to read); a
      TrueType file (``render.DEJAVU_SANS``) draws it ``font_size`` of the screen height tall, as
      the screen-only observation needs (``SimDroidConfig.readable()`` sets both with a scale).
    - ``font_size``: TrueType text height as a fraction of the screen height, in (0, 0.1].
    """

    width: int = 1080
    height: int = 2400
    screenshot_scale: float = 0.25
    distractor_prob: float = 0.0
    seed: int = 0
    faults: FaultConfig = field(default_factory=FaultConfig)
    font: str = ""
    font_size: float = 0.016

    def __post_init__(self) -> None:
        if self.width < 100 or self.height < 100:
            raise ValueError(
                f"SimDroidConfig needs width and height >= 100 px, got {self.width}x{self.height}"
            )
        if not 0.0 < self.screenshot_scale <= 1.0:
            raise ValueError(
                f"SimDroidConfig.screenshot_scale must be in (0, 1], got {self.screenshot_scale}"
            )
        if not 0.0 <= self.distractor_prob <= 1.0:
            raise ValueError(f"SimDroidConfig.distractor_prob is a probability, got {self.distractor_prob}")
        if not 0.0 < self.font_size <= 0.1:
            raise ValueError(
                f"SimDroidConfig.font_size is a fraction of the height in (0, 0.1], got {self.font_size}"
            )
        if self.font and not Path(self.font).is_file():
            raise ValueError(
                f"SimDroidConfig.font {self.font!r} is not a file; Debian installs DejaVu Sans with "
                "`apt-get install fonts-dejavu-core` (`make system-deps`)"
            )

    @property
    def typeface(self) -> Typeface:
        """The face screenshots draw their text in."""
        if not self.font:
            return Typeface()
        return Typeface(self.font, max(8, round(self.font_size * self.height * self.screenshot_scale)))

    def readable(self, scale: float = READABLE_SCALE) -> SimDroidConfig:
        """This config drawing screenshots an OCR model reads: DejaVu Sans at ``scale`` (half size:
        text about 19 px tall on a 1080x2400 screen)."""
        return replace(self, font=DEJAVU_SANS, screenshot_scale=scale)


def _keycode(key: int | str) -> int | None:
    if isinstance(key, int):
        return key
    name = str(key).strip().upper().removeprefix("KEYCODE_")
    if name.isdigit():
        return int(name)
    return KEY_NAMES.get(name)


class SimDroid:
    def __init__(self, config: SimDroidConfig | None = None, serial: str = "emulator-5554") -> None:
        self.config = config or SimDroidConfig()
        self.serial = serial
        self.size = (self.config.width, self.config.height)
        self.virtual_time_s = 0.0
        self.faults = FaultModel(self.config.faults)
        self.state = DeviceState()
        self._rng = random.Random(f"{self.config.seed}/distractors")
        self._loads = 0
        self._screen: Screen | None = None
        self._elements: list[UIElement] | None = None
        self._png: bytes | None = None
        self._image: Image.Image | None = None  # the screen drawn once, for its PNG and its pixels
        self._pixels: Pixels | None = None
        self._key: bytes | None = None

    # -- internals ---------------------------------------------------------------------------
    def _invalidate(self) -> None:
        self._screen = None
        self._elements = None
        self._png = None
        self._image = None
        self._pixels = None
        self._key = None

    def screen(self) -> Screen:
        """The current screen (rebuilt lazily after any change)."""
        if self._screen is None:
            self._screen = build_screen(self.state, *self.size)
        return self._screen

    def _input(self) -> None:
        """Common preamble of every input action: online check, outage roll, latency."""
        self.faults.check_online(self.serial)
        self.faults.roll_offline(self.serial)
        self.virtual_time_s += self.faults.apply_latency()

    def _mutate(self, change: Callable[[], None], *, dismiss_dialog: bool = False) -> None:
        """Run a state change (after closing any dialog, with ``dismiss_dialog``); roll for a
        distractor if it moved to another page."""
        before = self.state.nav_count
        if dismiss_dialog:
            self.state.dialog = None
        change()
        if self.state.nav_count != before:
            maybe_show_distractor(self.state, self._rng, self.config.distractor_prob)
        self._invalidate()

    # -- tasks -------------------------------------------------------------------------------
    def load_task(self, task: Task, seed: int | None = None) -> None:
        """Home screen plus the task's setup. ``seed`` (an addition to the contract) fixes the
        episode's distractor RNG; without it each load draws a fresh sequence."""
        self.faults.check_online(self.serial)
        if self.faults.reset_fails():
            raise ResetFailed(f"device {self.serial}: reset to task {task.task_id} failed")
        self.faults.roll_offline(self.serial)
        self._loads += 1
        episode = seed if seed is not None else f"load{self._loads}"
        self._rng = random.Random(f"{self.config.seed}/{episode}/{task.task_id}")
        state = DeviceState(task_id=task.task_id)
        setup = task.params.get("setup", {})
        for namespace, key, value in setup.get("settings", []):
            state.settings.setdefault(namespace, {})[key] = str(value)
        state.alarms = [dict(alarm) for alarm in setup.get("alarms", [])]
        self.state = state
        self._invalidate()

    def is_successful(self, task: Task) -> bool:
        return _is_successful(self.state, task)

    # -- input -------------------------------------------------------------------------------
    def tap(self, x: int, y: int) -> None:
        self._input()
        if self.faults.drop_tap():
            return
        self._tap(int(x), int(y))

    def _tap(self, x: int, y: int) -> None:
        screen = self.screen()
        widget = screen.hit(x, y)
        if widget is None:
            return
        state = self.state

        def change() -> None:
            if widget.field is not None:
                if state.focus == widget.field:
                    state.replace_on_type = False  # a second tap places the cursor instead
                else:
                    state.focus_field(widget.field, widget.text)
                return
            if not screen.modal:  # dismissing a dialog gives focus back to the page below
                state.focus = None
            x1, _, x2, _ = widget.bounds
            fraction = (x - x1) / max(1, x2 - x1 - 1)
            widget.on_tap(state, min(1.0, max(0.0, fraction)))  # type: ignore[misc]

        self._mutate(change)

    def long_press(self, x: int, y: int, duration_ms: int = 800) -> None:
        self.tap(x, y)

    def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int = 300) -> None:
        self._input()
        x1, y1, x2, y2 = int(x1), int(y1), int(x2), int(y2)
        dx, dy = x2 - x1, y2 - y1
        if dx * dx + dy * dy < TAP_SLOP_PX * TAP_SLOP_PX:
            if not self.faults.drop_tap():
                self._tap(x1, y1)
            return
        screen = self.screen()
        start = screen.hit(x1, y1)
        if start is not None and start.slider_value is not None and start.on_tap is not None:
            drag = start.on_tap
            bx1, _, bx2, _ = start.bounds
            fraction = min(1.0, max(0.0, (x2 - bx1) / max(1, bx2 - bx1 - 1)))
            self._mutate(lambda: drag(self.state, fraction))
            return
        on_swipe = screen.on_swipe
        if on_swipe is not None and not screen.modal:
            direction = ("left" if dx < 0 else "right") if abs(dx) > abs(dy) else ("up" if dy < 0 else "down")
            self._mutate(lambda: on_swipe(self.state, direction))

    def input_text(self, text: str) -> None:
        self._input()
        state = self.state
        if state.focus is None or self.screen().modal:
            return
        text = _UNTYPEABLE.sub("", text)
        if state.replace_on_type:
            state.fields[state.focus] = text
            state.replace_on_type = False
        else:
            state.fields[state.focus] = state.fields.get(state.focus, "") + text
        self._invalidate()

    def keyevent(self, key: int | str) -> None:
        self._input()
        code = _keycode(key)
        state = self.state
        if code == 3:
            self._mutate(state.go_home, dismiss_dialog=True)
        elif code == 4:
            if state.dialog is not None:
                state.dialog = None
                self._invalidate()
            elif state.focus is not None:
                state.focus = None
                self._invalidate()
            else:
                self._mutate(state.pop)
        elif code == 66 and state.focus is not None and state.dialog is None:
            widget = self.screen().field_widget(state.focus)
            submit = widget.on_submit if widget is not None else None
            if submit is not None:
                self._mutate(lambda: submit(state))
        elif code == 67 and state.focus is not None:
            current = state.fields.get(state.focus, "")
            state.fields[state.focus] = "" if state.replace_on_type else current[:-1]
            state.replace_on_type = False
            self._invalidate()
        # any other keycode (volume, menu, power...) has no effect here

    def start_app(self, package: str, activity: str | None = None) -> None:
        self._input()
        if package == LAUNCHER:
            self._mutate(self.state.go_home)
            return
        app = find_app(package)
        if app is None or app.package != package:
            raise UnknownPackage(f"package {package!r} is not installed on {self.serial}")
        self._mutate(lambda: launch(self.state, package), dismiss_dialog=True)

    def force_stop(self, package: str) -> None:
        self._input()
        if self.state.package == package:
            self._mutate(self.state.go_home, dismiss_dialog=True)

    # -- output ------------------------------------------------------------------------------
    def elements(self) -> list[UIElement]:
        self.faults.check_online(self.serial)
        if self._elements is None:
            self._elements = self.screen().elements(self.state)
        return list(self._elements)

    def ui_xml(self) -> str:
        return elements_to_xml(self.elements(), self.size)

    @property
    def shot_size(self) -> tuple[int, int]:  # the screen's size times screenshot_scale
        scale = self.config.screenshot_scale
        return (max(1, int(self.size[0] * scale)), max(1, int(self.size[1] * scale)))

    def _rendered(self) -> Image.Image:
        if self._image is None:
            self._image = draw.render_image(
                self.screen(), self.state, self.size, self.config.screenshot_scale, self.config.typeface
            )
        return self._image

    def screenshot_png(self) -> bytes:
        self.faults.check_online(self.serial)
        corruption = self.faults.corruption()
        if self._png is None:
            self._png = draw.encode_png(self._rendered())
        if corruption == "truncated":
            return self._png[: len(self._png) // 2]
        if corruption is not None:
            return solid_png(self.shot_size, (255, 255, 255) if corruption == "white" else (0, 0, 0))
        return self._png

    @overload
    def screenshot_pixels(self, lazy: Literal[False] = False) -> Pixels | None: ...
    @overload
    def screenshot_pixels(self, lazy: bool) -> Pixels | Callable[[], Pixels] | None: ...
    def screenshot_pixels(self, lazy: bool = False) -> Pixels | Callable[[], Pixels] | None:
        """The screenshot as read-only (height, width, 3) RGB uint8 pixels, ``screenshot_png`` decoded
        with no PNG encoded. Faults as there: white or black frames are solid arrays; a truncated
        one has no pixel form and is None, a failed capture the env retries (``SimDroidEnv``).
        ``lazy``: a frame not drawn yet comes as a function drawing it (call it before the device
        changes): the OCR calls it only for a ``screen_key`` it has not read."""
        self.faults.check_online(self.serial)
        corruption = self.faults.corruption()
        if corruption == "truncated":
            return None
        if corruption is not None:
            width, height = self.shot_size
            return np.full((height, width, 3), 255 if corruption == "white" else 0, np.uint8)
        if lazy and self._pixels is None:
            return self._drawn_pixels
        return self._drawn_pixels()

    def _drawn_pixels(self) -> Pixels:
        if self._pixels is None:
            self._pixels = draw.to_pixels(self._rendered())
        return self._pixels

    def screen_key(self) -> bytes:
        """``render.screen_key`` of this screen: equal keys, equal (sound) screenshots."""
        if self._key is None:
            scale, face = self.config.screenshot_scale, self.config.typeface
            self._key = draw.screen_key(self.screen(), self.state, self.size, scale, face)
        return self._key

    def current_activity(self) -> str:
        self.faults.check_online(self.serial)
        return self.screen().activity

    def settings_get(self, namespace: str, key: str) -> str | None:
        self.faults.check_online(self.serial)
        return self.state.setting(namespace, key)

    def settings_put(self, namespace: str, key: str, value: str) -> None:
        self.faults.check_online(self.serial)
        self.state.settings.setdefault(namespace, {})[key] = str(value)
        self._invalidate()

    # -- snapshots and health ----------------------------------------------------------------
    def snapshot(self) -> bytes:
        version, internal, gauss = self._rng.getstate()
        return self.state.to_bytes(
            {"rng": [version, list(internal), gauss], "virtual_time_s": self.virtual_time_s}
        )

    def restore(self, blob: bytes) -> None:
        state, extra = DeviceState.from_bytes(blob)
        self.state = state
        if "rng" in extra:
            version, internal, gauss = extra["rng"]
            self._rng.setstate((version, tuple(internal), gauss))
        self._invalidate()

    def check_online(self) -> None:
        self.faults.check_online(self.serial)

    @property
    def online(self) -> bool:
        return self.faults.online
