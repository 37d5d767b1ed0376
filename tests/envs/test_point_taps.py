"""Taps judged as on a phone: a point tap anywhere inside an element's bounds does what the element
tap does, in SimDroid's state and in its success rules; a point just outside does not."""

from __future__ import annotations

import random

import pytest

from distrl_core.envs.action_rules import ActionKind
from distrl_core.envs.actions import Action, format_action, parse_action
from distrl_core.envs.actions_autoui import format_autoui_action, parse_autoui_action
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from simulators.simdroid.expert import expert_action
from simulators.simdroid.tasks import load_tasks

KINDS = ("open_app", "toggle_setting", "set_alarm", "web_search", "shop_add_to_cart")


def _tasks() -> list[str]:
    tasks = load_tasks(None, "test")
    return [next(t.task_id for t in tasks if t.kind == kind) for kind in KINDS]


def _env() -> SimDroidEnv:
    return SimDroidEnv(SimDroidEnvConfig(screenshots=False, ui_xml=False))


@pytest.mark.parametrize("task_id", _tasks())
def test_a_point_inside_the_bounds_is_the_element_tap(task_id: str) -> None:
    by_index, by_point = _env(), _env()
    by_index.reset(task_id, seed=7)
    by_point.reset(task_id, seed=7)
    rng = random.Random(task_id)
    width, height = by_point.device.size
    points = 0
    for _ in range(20):
        action = expert_action(by_index, by_index.task)  # type: ignore[arg-type]
        point_action = action
        if action.kind is ActionKind.TAP and action.index is not None:
            x1, y1, x2, y2 = by_point.device.elements()[action.index].bounds
            x, y = rng.randrange(x1, x2), rng.randrange(y1, y2)  # anywhere in the box, edges included
            point_action = Action.tap(point=((x + 0.5) / width, (y + 0.5) / height))
            # through the AutoUI format and back, as an AutoUI-style policy would emit it
            point_action = parse_autoui_action(format_autoui_action(point_action))
            assert parse_action(format_action(point_action)) == point_action
            points += 1
        a, b = by_index.step(action), by_point.step(point_action)
        assert by_point.device.snapshot() == by_index.device.snapshot()
        assert (b.reward, b.done, b.info.success) == (a.reward, a.done, a.info.success)
        if a.done:
            break
    assert a.info.success and points >= 1


def test_a_point_just_outside_the_bounds_misses() -> None:
    task = next(t for t in load_tasks("general", "test") if t.kind == "open_app")
    env = _env()
    env.reset(task.task_id, seed=3)
    target = next(e for e in env.device.elements() if e.text == "Settings")
    width, height = env.device.size
    x1, _, x2, y2 = target.bounds
    inside = Action.tap(point=((x2 - 0.5) / width, (y2 - 0.5) / height))  # the last pixel row and column
    below = Action.tap(point=((x1 + x2) / 2 / width, (y2 + 1.5) / height))  # in the gap under it
    before = env.device.snapshot()
    env.step(below)
    assert env.device.state.package != "com.android.settings"
    env.device.restore(before)
    env.step(inside)
    assert env.device.state.package == "com.android.settings"
