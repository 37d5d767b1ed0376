"""The warm start on screen observations: the expert's element taps mapped to the OCR's elements
(by text, else by the box read where the element is drawn), the tree's demonstrations unchanged,
and a small screen warm start that SFT trains on."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from distrl_core.envs.actions import Action
from distrl_core.envs.observation import Observation, UIElement
from distrl_core.envs.screen import screen_observation
from flows.train_local import warm_start_config
from flows.train_local_params import TrainLocalParams
from simulators.ocr import ocr_missing_reason
from simulators.rollout import RolloutConfig, expert_actor, run_episodes
from simulators.screen_env import box_at, on_screen
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from simulators.simdroid.device import SimDroidConfig
from simulators.simdroid.expert import expert_action
from simulators.simdroid.render import DEJAVU_SANS
from simulators.simdroid.tasks import load_tasks
from simulators.warm_start import WarmStartConfig, collect_demonstrations, supervised_warm_start


def _box(index: int, text: str, bounds: tuple[int, int, int, int]) -> UIElement:
    return UIElement(index, text=text, class_name="android.widget.TextView", bounds=bounds, clickable=True)


def test_box_at_takes_the_box_that_holds_the_centre_else_the_largest_overlap() -> None:
    truth = (100, 100, 300, 200)  # centre (200, 150)
    elements = [
        _box(0, "far", (500, 500, 600, 560)),
        _box(1, "wide", (90, 120, 310, 180)),  # holds the centre
        _box(2, "tight", (180, 130, 230, 170)),  # holds it too, smaller: wins
    ]
    assert box_at(elements, truth) == 2
    # None holds the centre: the most overlapping box whose own centre lies inside wins.
    elements = [_box(0, "a", (110, 105, 150, 125)), _box(1, "b", (110, 160, 190, 195))]
    assert box_at(elements, truth) == 1
    # A box whose centre lies outside the element would tap something else: never taken.
    assert box_at([_box(0, "x", (250, 90, 400, 210))], truth) is None
    assert box_at([], truth) is None


def _alarm_list() -> tuple[SimDroidEnv, Observation, Action]:
    """A tree-observed SimDroid on the Clock's alarm list, and the expert's tap on *Add alarm*."""
    env = SimDroidEnv(SimDroidEnvConfig(screenshots=False, ui_xml=False, serial="sim-alarm"))
    for task in (t for t in load_tasks("general", "train") if t.kind == "set_alarm"):
        observation = env.reset(task, seed=1)
        for _ in range(6):
            action = expert_action(env, task)
            if action.index is not None and env.device.elements()[action.index].content_desc == "Add alarm":
                return env, observation, action
            result = env.step(action)
            if result.done:
                break
            observation = result.observation
    raise AssertionError("no train alarm task reached the Add alarm button")


def test_the_add_alarm_icon_maps_to_the_box_read_where_it_is_drawn() -> None:
    env, observation, action = _alarm_list()
    phone = env.device
    assert action.index is not None
    fab = phone.elements()[action.index]
    x1, y1, x2, y2 = fab.bounds
    title = _box(0, "ALARM", (44, 254, 191, 303))
    icon = _box(1, "O", (x1 + 40, y1 + 30, x2 - 40, y2 - 30))  # the "+" in its circle, read as O
    screen = screen_observation(observation, (title, icon))
    assert on_screen(action, phone, screen) == Action.tap(1)
    # A text match still wins over the box read there.
    named = _box(2, "Add alarm", (40, 600, 300, 650))
    assert on_screen(action, phone, screen_observation(observation, (title, icon, named))) == Action.tap(2)
    # Neither read: an invalid action saying so.
    missing = on_screen(action, phone, screen_observation(observation, (title,)))
    assert not missing.is_valid and "Add alarm" in (missing.reason or "")


def test_a_tree_warm_start_collects_the_rows_it_always_did() -> None:
    tasks = load_tasks("general", "train")[:6]
    config = WarmStartConfig(seed=3, noise=0.3)
    rows = collect_demonstrations(config, tasks).rows
    before = run_episodes(  # what collect_demonstrations ran before the observation field
        expert_actor(0.3, 3),
        tasks,
        RolloutConfig(
            env=SimDroidEnvConfig(
                device=SimDroidConfig(distractor_prob=0.1), screenshots=False, ui_xml=False
            ),
            parallel_envs=1,
            seed=3,
            policy_name="scripted-expert",
        ),
    ).rows
    clock = ("step_started_at", "step_latency_ms")
    assert [{k: v for k, v in r.items() if k not in clock} for r in rows] == [
        {k: v for k, v in r.items() if k not in clock} for r in before
    ]
    assert {r["observation"] for r in rows} == {"tree"}


def test_train_local_warm_starts_on_its_own_observation() -> None:
    assert warm_start_config(TrainLocalParams()).observation == "tree"
    assert warm_start_config(TrainLocalParams(observation="screen")).observation == "screen"
    with pytest.raises(ValueError, match="observation"):
        WarmStartConfig(observation="pixels")  # type: ignore[arg-type]


def _missing() -> str | None:
    if not Path(DEJAVU_SANS).is_file():
        return f"{DEJAVU_SANS} is not installed (`make system-deps`: apt-get install fonts-dejavu-core)"
    return ocr_missing_reason()


@pytest.mark.slow  # a dozen demonstrated episodes, every step read by the OCR
@pytest.mark.skipif(_missing() is not None, reason=str(_missing()))
def test_a_screen_warm_start_learns_from_the_ocrs_elements(make_policy) -> None:
    kinds = ("open_app", "toggle_setting", "web_search")
    train = load_tasks("general", "train")
    tasks = [next(t for t in train if t.kind == kind) for kind in kinds]
    config = WarmStartConfig(
        seed=1, noise=0.2, episodes_per_task=2, updates=8, batch_size=6, observation="screen"
    )
    demos = collect_demonstrations(config, tasks)
    rows = demos.rows
    assert {r["observation"] for r in rows} == {"screen"}
    assert all(r["screenshot_png"] is None for r in rows)  # read from pixels, none kept
    assert demos.success_rate > 0.5, demos.episodes
    assert any(r["action"].startswith("tap(0.") for r in rows)  # element taps stored as points
    history = supervised_warm_start(make_policy(), rows, config)
    losses = [h["nll"] for h in history]
    assert all(math.isfinite(x) for x in losses) and history[0]["known_fraction"] > 0.5
    assert losses[-1] < losses[0], losses
