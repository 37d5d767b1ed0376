"""The rule-based evaluator against the real SimDroid device."""

from __future__ import annotations

import pytest

from distrl_core.evaluators import EpisodeContext, Evaluator, Verdict
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from simulators.sim_rules import SimStateEvaluator
from simulators.simdroid import DeviceOffline, FaultConfig, SimDroid, SimDroidConfig, load_tasks
from simulators.simdroid.catalog import TOGGLE_BY_KEY
from simulators.simdroid.expert import expert_action


def first_task(kind: str, split: str = "train"):
    return next(task for task in load_tasks(split=split) if task.kind == kind)


def evaluate(device: SimDroid, task) -> Verdict:
    return SimStateEvaluator().evaluate(EpisodeContext(task.instruction, task=task, device=device)).verdict


def test_is_an_evaluator() -> None:
    assert isinstance(SimStateEvaluator(), Evaluator)


def test_every_task_fails_on_a_fresh_device() -> None:
    device = SimDroid()
    evaluator = SimStateEvaluator(device)
    tasks = load_tasks()
    assert {task.kind for task in tasks} >= {"open_app", "toggle_setting", "set_alarm", "shop_add_to_cart"}
    for task in tasks:
        device.load_task(task, seed=0)
        result = evaluator.evaluate(EpisodeContext(task.instruction, task=task))
        assert result.verdict is Verdict.FAILURE, task
        assert result.source == "sim_rules"
        assert task.task_id in result.reason


@pytest.mark.parametrize("split", ["train", "test"])
def test_expert_episodes_succeed_and_fresh_devices_fail(split: str) -> None:
    # end_on_success=False: the episode runs until the expert says status(complete), as a policy would
    config = SimDroidEnvConfig(
        device=SimDroidConfig(distractor_prob=0.2), screenshots=False, ui_xml=False, end_on_success=False
    )
    env = SimDroidEnv(config)
    evaluator = SimStateEvaluator()
    tasks = load_tasks(split=split)
    assert len({task.kind for task in tasks}) >= 8
    for n, task in enumerate(tasks):
        observation = env.reset(task, seed=n)
        fresh = EpisodeContext(task.instruction, task=task, ui_text=observation.ui_text, device=env.device)
        assert evaluator.evaluate(fresh).verdict is Verdict.FAILURE, task
        result = None
        while result is None or not result.done:
            result = env.step(expert_action(env, task))
        final = EpisodeContext(
            task.instruction,
            task=task,
            actions=tuple(env.history),
            ui_text=result.observation.ui_text,
            device=env.device,
        )
        verdict = evaluator.evaluate(final).verdict
        assert verdict is Verdict.SUCCESS, (task, env.history)
        assert env.history[-1] == "status(complete)"


def test_open_app_succeeds_once_the_app_is_in_front() -> None:
    task = first_task("open_app", split="test")
    device = SimDroid()
    device.load_task(task, seed=0)
    assert evaluate(device, task) is Verdict.FAILURE
    device.start_app(task.params["package"])
    assert evaluate(device, task) is Verdict.SUCCESS
    device.keyevent("KEYCODE_HOME")
    assert evaluate(device, task) is Verdict.FAILURE


def test_toggle_setting_follows_the_device_setting() -> None:
    task = first_task("toggle_setting")
    toggle = TOGGLE_BY_KEY[task.params["setting"]]
    wanted = toggle.on_value if task.params["on"] else toggle.off_value
    unwanted = toggle.off_value if task.params["on"] else toggle.on_value
    device = SimDroid()
    device.load_task(task, seed=0)
    device.settings_put(toggle.namespace, toggle.setting, wanted)
    assert evaluate(device, task) is Verdict.SUCCESS
    device.settings_put(toggle.namespace, toggle.setting, unwanted)
    assert evaluate(device, task) is Verdict.FAILURE


def test_restored_snapshot_restores_the_verdict() -> None:
    task = first_task("open_app")
    device = SimDroid()
    device.load_task(task, seed=0)
    fresh = device.snapshot()
    device.start_app(task.params["package"])
    done = device.snapshot()
    device.restore(fresh)
    assert evaluate(device, task) is Verdict.FAILURE
    device.restore(done)
    assert evaluate(device, task) is Verdict.SUCCESS


def test_offline_device_gives_unknown_not_a_guess() -> None:
    task = first_task("open_app")
    device = SimDroid(SimDroidConfig(faults=FaultConfig(offline_prob=1.0, offline_duration_s=60.0)))
    with pytest.raises(DeviceOffline):
        device.load_task(task, seed=0)
    result = SimStateEvaluator(device).evaluate(EpisodeContext(task.instruction, task=task))
    assert result.verdict is Verdict.UNKNOWN
    assert "offline" in result.reason


def test_missing_device_or_task_is_a_clear_error() -> None:
    task = first_task("open_app")
    with pytest.raises(ValueError, match="EpisodeContext\\(device="):
        SimStateEvaluator().evaluate(EpisodeContext(task.instruction, task=task))
    with pytest.raises(ValueError, match="EpisodeContext\\(task="):
        SimStateEvaluator(SimDroid()).evaluate(EpisodeContext(task.instruction))
