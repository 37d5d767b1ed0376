"""ScreenEnv: any environment (SimDroid, an ADB device) observed through its screenshot alone.

Under ``observation="screen"`` the policy's elements come from an OCR of the screenshot
(``distrl_core.envs.screen``), never from the UI dump; the wrapped environment still judges
success from its own truth (SimDroid's state, ADB's checks). An element tap is sent to the device
as a tap on its box's centre, so the device's own element numbering is never used.

Example::

    env = ScreenEnv(SimDroidEnv(SimDroidEnvConfig(device=SimDroidConfig().readable())), OcrReader())
    observation = env.reset("general-train-0000")  # observation.ui_text: what the OCR read
    env.step("tap(2)")  # taps the centre of the third box read
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from typing import Any, ClassVar

from distrl_core.envs.action_rules import ActionKind
from distrl_core.envs.actions import Action, format_action, parse_action
from distrl_core.envs.kinds import EnvKind
from distrl_core.envs.observation import Bounds, Observation, UIElement
from distrl_core.envs.protocol import Environment, StepResult, Task
from distrl_core.envs.screen import ScreenConfig, as_executed, find_text, screen_elements, screen_observation
from distrl_core.policy.types import ActOutput
from simulators.ocr import OcrReader
from simulators.sim_env import SimDroidEnvConfig
from simulators.simdroid.device import SimDroid

__all__ = ["ScreenEnv", "box_at", "on_screen", "readable_sim_config", "screen_envs", "screen_expert_actor"]


class ScreenEnv:
    """The ``Environment`` protocol over ``env``, with observations read from its screenshots.

    The wrapped environment must capture screenshots (``SimDroidEnvConfig.screenshots``,
    ``AdbEnvConfig.screenshots``), each read from its PNG, or capture none and offer
    ``screen_pixels()`` (``simulators.screen_frames.PixelFrame``), read from its pixels with no PNG
    encoded at all: what ``make_env`` builds when the shards keep no screenshot. SimDroid's must be
    drawn readable (``SimDroidConfig.readable``).
    Attributes the wrapper does not define (``task``, ``device``, ``history``...) are the wrapped
    environment's.
    """

    kind: ClassVar[EnvKind]  # set per instance from the wrapped environment

    def __init__(
        self,
        env: Environment,
        reader: OcrReader,
        config: ScreenConfig | None = None,
        *,
        keep_screenshots: bool = True,
    ) -> None:
        self.env = env
        self.reader = reader
        self.config = config or ScreenConfig()
        # The OCR needs the screenshot; the shards need it only when asked for (kilobytes a step).
        self.keep_screenshots = keep_screenshots
        self.kind = env.kind  # type: ignore[misc]  # per instance: a wrapper takes its device's kind
        self._last: Observation | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    @property
    def serial(self) -> str | None:
        return self.env.serial

    def _read(self, observation: Observation) -> Observation:
        png = observation.screenshot_png
        # Textless widgets (sliders, icon buttons, empty fields) from the same pixels, below the status bar.
        below = self.config.status_bar if self.config.widgets else None
        if png is not None:
            boxes, shot_size, widgets = self.reader.read_screen(png, widgets_below=below)
        elif hasattr(self.env, "screen_pixels"):
            # No PNG captured (the shards keep none): the device's pixels go to the OCR as they are.
            frame = self.env.screen_pixels()
            boxes, shot_size, widgets = self.reader.read_screen(
                pixels=frame.pixels, key=frame.key, widgets_below=below
            )
            extras = {**observation.extras, "screenshot_ok": frame.ok}
            observation = dataclasses.replace(observation, extras=extras)
        else:
            raise ValueError(
                f"{type(self.env).__name__} {self.serial} captured no screenshot; the screen "
                "observation needs one (its config's `screenshots=True`)"
            )
        elements = screen_elements(boxes, shot_size, observation.screen_size, self.config, widgets)
        self._last = screen_observation(observation, elements)
        if not self.keep_screenshots:
            return dataclasses.replace(self._last, screenshot_png=None)
        return self._last

    def reset(self, task: Task | str, seed: int | None = None) -> Observation:
        return self._read(self.env.reset(task, seed=seed))

    def step(self, action: Action | str) -> StepResult:
        if isinstance(action, str):
            action = parse_action(action)
        if self._last is not None:  # an element number means a box of the last screen read
            action = as_executed(action, self._last)
        result = self.env.step(action)
        return StepResult(
            self._read(result.observation), result.reward, result.done, result.info, result.truncated
        )

    def close(self) -> None:
        self.env.close()


def screen_envs(envs: list[Environment], reader: OcrReader, config: ScreenConfig | None = None) -> list[Any]:
    """Each of ``envs`` observed through the screen, sharing one OCR model."""
    return [ScreenEnv(env, reader, config) for env in envs]


def readable_sim_config(config: SimDroidEnvConfig, pngs: bool = True) -> SimDroidEnvConfig:
    """``config`` drawing the screenshots the screen observation reads: readable
    (``SimDroidConfig.readable``) unless a font is already chosen, captured as PNGs with ``pngs``,
    else none (the screen observation then reads ``SimDroidEnv.screen_pixels``)."""
    device = config.device if config.device.font else config.device.readable()
    return dataclasses.replace(config, screenshots=pngs, device=device)


def on_screen(action: Action, truth: SimDroid, observation: Observation) -> Action:
    """A SimDroid element tap (``action``, numbered in ``truth``'s element list) as an element of
    the screen observation: how the scripted expert acts from screenshots (tests, the warm start
    on screen observations, ``bench/ocr_screens.py``). Other actions, point taps included, are
    unchanged.

    The element that reads the truth element's text wins (``find_text``). When none does (an icon
    the OCR reads as another glyph, or as nothing: the Clock's *Add alarm* "+"), the element read
    where the truth element is drawn stands for it (``box_at``): a text box, or a widget found in
    the pixels (``ScreenConfig.widgets``; the *Add alarm* square is an ``ImageButton "icon"``
    there). An element with neither becomes an invalid action saying so, never the truth's
    coordinates. A slider is set by a point tap, which passes unchanged."""
    if action.kind not in (ActionKind.TAP, ActionKind.LONG_PRESS) or action.index is None:
        return action
    element = truth.elements()[action.index]
    found = find_text(observation.elements, element.label)
    if found is None:
        found = box_at(observation.elements, element.bounds)
    if found is None:
        return Action.invalid(
            str(action), f"no element of the screen reads {element.label!r} or lies where it is drawn"
        )
    return Action(action.kind, index=found)


def box_at(elements: Sequence[UIElement], bounds: Bounds) -> int | None:
    """The index of the element read where ``bounds`` (a truth element's box) is drawn, both in the
    screen's pixels (x2, y2 exclusive), or None.

    Only an element whose own centre lies inside ``bounds`` qualifies: a tap on it (executed on
    that centre) lands on the truth element. Among those, one whose box holds ``bounds``'s centre
    wins, the smallest such box if several; else the one whose box overlaps ``bounds`` most (by
    intersection area); ties go to the first in reading order."""
    x1, y1, x2, y2 = bounds
    cx, cy = (x1 + x2) // 2, (y1 + y2) // 2

    def inside(x: int, y: int, box: Bounds) -> bool:
        return box[0] <= x < box[2] and box[1] <= y < box[3]

    def area(box: Bounds) -> int:
        return max(0, box[2] - box[0]) * max(0, box[3] - box[1])

    def overlap(box: Bounds) -> int:
        return area((max(x1, box[0]), max(y1, box[1]), min(x2, box[2]), min(y2, box[3])))

    landing = [i for i, e in enumerate(elements) if inside(*e.center, bounds)]
    holding = [i for i in landing if inside(cx, cy, elements[i].bounds)]
    if holding:
        return min(holding, key=lambda i: (area(elements[i].bounds), i))
    if landing:
        return min(landing, key=lambda i: (-overlap(elements[i].bounds), i))
    return None


def screen_expert_actor(noise: float, seed: int) -> Any:
    """The noisy scripted expert acting through the screen observation's elements: its action is
    chosen on the device (``expert_action``), then an element tap becomes the box the OCR read for
    it (``on_screen``), or an invalid action where none was read. An ``ActFn`` for ``run_episodes``
    over ``ScreenEnv``s of SimDroid (the warm start's demonstrations under ``observation="screen"``);
    its random draws are those of ``rollout.expert_actor`` for the same seed."""
    from simulators.simdroid.expert import expert_action

    rng = random.Random(seed)

    def act(envs: list[Any], observations: list[Observation]) -> list[ActOutput]:
        outputs = []
        for env, observation in zip(envs, observations, strict=True):
            phone = env.device
            chosen = expert_action(phone, env.task, noise=noise, rng=rng if noise > 0 else None)
            action = on_screen(chosen, phone, observation)
            outputs.append(ActOutput(format_action(action), action, 0.0, 0, 0.0, 0.0))
        return outputs

    return act
