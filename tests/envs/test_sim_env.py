"""SimDroidEnv: Action -> device mapping, rewards and episode ends, observations, faults, gym API."""

from __future__ import annotations

import io

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from PIL import Image

from distrl_core.envs.actions import Action
from distrl_core.envs.protocol import StepInfo
from simulators.factory import make_env, make_sim_envs
from simulators.gym_env import SimDroidGymEnv
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from simulators.simdroid import FaultConfig, SimDroidConfig, get_task, load_tasks
from simulators.simdroid.catalog import APPS, APPS_PER_PAGE, CHROME, LAUNCHER
from simulators.simdroid.expert import expert_action


def quiet(**overrides: object) -> SimDroidEnvConfig:
    """No distractors, so that tests know what is on screen."""
    return SimDroidEnvConfig(device=SimDroidConfig(distractor_prob=0.0), **overrides)


def index_of(obs, text: str) -> int:
    return next(el.index for el in obs.elements if el.text == text)


# an "open app" task whose app sits on the first launcher page (and is not Settings)
OPEN_APP = next(
    t
    for t in load_tasks("general", "train")
    if t.kind == "open_app" and t.params["app"] in [a.name for a in APPS[1:APPS_PER_PAGE]]
)
APP = OPEN_APP.params["app"]


def test_reset_gives_a_full_observation() -> None:
    env = SimDroidEnv(quiet())
    obs = env.reset("general-train-0003")
    assert obs.instruction == get_task("general-train-0003").instruction
    assert obs.step == 0 and obs.previous_actions == ()
    assert obs.ui_text.splitlines()[0].startswith("[0] ")
    assert len(obs.ui_text.splitlines()) == len(obs.elements)
    assert obs.ui_xml.startswith("<?xml") and "<hierarchy" in obs.ui_xml
    Image.open(io.BytesIO(obs.screenshot_png)).verify()
    assert obs.activity.startswith(LAUNCHER)
    assert obs.extras["task_id"] == "general-train-0003"


def test_text_only_mode_skips_screenshots_and_xml() -> None:
    env = SimDroidEnv(quiet(screenshots=False, ui_xml=False))
    obs = env.reset()
    assert obs.screenshot_png is None and obs.ui_xml == ""
    assert obs.elements


def test_seeded_sampling_is_reproducible_and_stays_in_the_pool() -> None:
    env = SimDroidEnv(quiet(family="webshop", split="test", screenshots=False))
    first = [env.reset(seed=5).extras["task_id"] for _ in range(1)] + [
        env.reset().extras["task_id"] for _ in range(5)
    ]
    again = [env.reset(seed=5).extras["task_id"] for _ in range(1)] + [
        env.reset().extras["task_id"] for _ in range(5)
    ]
    assert first == again
    assert all(task_id.startswith("webshop-test-") for task_id in first)
    assert len(set(first)) > 1


def test_success_ends_the_episode_with_reward_one() -> None:
    env = SimDroidEnv(quiet(screenshots=False))
    obs = env.reset(OPEN_APP)
    result = env.step(Action.tap(index_of(obs, APP)))
    assert result.done and not result.truncated
    assert result.reward == 1.0 and result.info.success
    assert result.observation.activity.startswith(OPEN_APP.params["package"])
    with pytest.raises(RuntimeError, match="reset"):
        env.step(Action.press("HOME"))


def test_rewards_are_terminal_only_and_status_ends_the_episode() -> None:
    env = SimDroidEnv(quiet(screenshots=False))
    obs = env.reset(OPEN_APP)
    result = env.step(Action.tap(index_of(obs, "Settings")))
    assert (result.reward, result.done) == (0.0, False)
    result = env.step("status(complete)")
    assert result.done and not result.truncated and result.reward == 0.0 and not result.info.success


def test_horizon_truncates() -> None:
    env = SimDroidEnv(quiet(screenshots=False))
    env.reset(OPEN_APP)
    results = [env.step(Action.press("BACK")) for _ in range(OPEN_APP.horizon)]
    assert [r.done for r in results] == [False] * (OPEN_APP.horizon - 1) + [True]
    assert results[-1].truncated and results[-1].info.truncated and results[-1].reward == 0.0


def test_invalid_actions_do_nothing_and_cost_the_penalty() -> None:
    env = SimDroidEnv(quiet(screenshots=False, invalid_action_penalty=-0.1))
    obs = env.reset(OPEN_APP)
    before = obs.ui_xml
    for text in ("click the clock", "tap(99)", 'open_app("Nonexistent")'):
        result = env.step(text)
        assert result.info.invalid and result.info.invalid_reason
        assert result.reward == pytest.approx(-0.1)
        assert result.observation.ui_xml == before
    assert result.observation.previous_actions[0] == 'invalid("click the clock")'
    assert result.observation.previous_actions[1:] == ("tap(99)", 'open_app("Nonexistent")')
    assert result.observation.step == 3


def test_every_action_kind_reaches_the_device() -> None:
    env = SimDroidEnv(quiet(screenshots=False))
    env.reset(OPEN_APP)
    assert not env.step(Action.swipe("left")).done
    assert env.device.state.page["page"] == 1
    assert not env.step(Action.swipe(start=(0.2, 0.5), end=(0.8, 0.5))).done
    assert env.device.state.page["page"] == 0
    obs = env.step('open_app("chrome")').observation
    assert obs.activity.startswith(CHROME)
    url = next(el for el in obs.elements if el.editable)
    env.step(Action.long_press(url.index))
    env.step(Action.type_text("shopmart.com"))
    obs = env.step(Action.press("ENTER")).observation
    assert env.device.state.page["name"] == "site"
    assert 'TextView "ShopMart"' in obs.ui_text
    env.step(Action.press("HOME"))
    x, y = next(el for el in env.device.elements() if el.text == APP).center
    result = env.step(Action.tap(point=(x / 1080, y / 2400)))
    assert result.done and result.info.success


def test_end_on_success_off_waits_for_the_status_action() -> None:
    env = SimDroidEnv(quiet(screenshots=False, end_on_success=False))
    obs = env.reset(OPEN_APP)
    result = env.step(Action.tap(index_of(obs, APP)))
    assert not result.done and result.reward == 0.0 and result.info.success
    result = env.step(Action.complete())
    assert result.done and result.reward == 1.0


def test_episodes_survive_every_fault_at_once() -> None:
    faults = FaultConfig(
        seed=3,
        latency="emulator",
        latency_scale_s=0.8,
        latency_mode="virtual",
        drop_tap_prob=0.1,
        offline_prob=0.03,
        offline_duration_s=0.005,
        corrupt_screenshot_prob=0.3,
        reset_fail_prob=0.3,
    )
    env = SimDroidEnv(SimDroidEnvConfig(device=SimDroidConfig(faults=faults), reset_retries=10))
    tasks = load_tasks(split="test")[::4]
    successes, frames, sound_frames = 0, 0, 0
    for task in tasks:
        obs = env.reset(task)
        done = False
        while not done:
            result = env.step(expert_action(env, task))
            done = result.done
            frames += 1
            if result.observation.extras["screenshot_ok"]:
                sound_frames += 1
                with Image.open(io.BytesIO(result.observation.screenshot_png)) as image:
                    image.load()  # the env re-captured truncated frames...
                    assert image.getcolors(1) is None  # ...and blank ones
        successes += result.info.success
    assert sound_frames >= 0.95 * frames
    counts = env.device.faults.counts
    assert all(counts[name] > 0 for name in counts), counts
    assert env.offline_waits > 0
    assert env.device.virtual_time_s > 0.5 * len(tasks)
    assert obs is not None and successes / len(tasks) >= 0.7  # dropped taps cost a few episodes


def test_gym_wrapper_passes_the_checker_and_plays_an_episode() -> None:
    env = SimDroidGymEnv(quiet())
    check_env(env, skip_render_check=True)
    text, info = env.reset(seed=0, options={"task": OPEN_APP.task_id})
    assert text.startswith(f"Instruction: {OPEN_APP.instruction}\n")
    assert env.observation_space.contains(text)
    icon = index_of(info["observation"], APP)
    text, reward, terminated, truncated, info = env.step(f"tap({icon})")
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert "Previous actions: tap(" in text


def test_gym_render_returns_the_screenshot() -> None:
    env = SimDroidGymEnv(quiet(), render_mode="rgb_array")
    env.reset(seed=1)
    frame = env.render()
    assert isinstance(frame, np.ndarray) and frame.shape == (600, 270, 3)
    assert SimDroidGymEnv(quiet()).render() is None


def test_config_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="family"):
        SimDroidEnvConfig(family="shopping")
    with pytest.raises(ValueError, match="penalty"):
        SimDroidEnvConfig(invalid_action_penalty=0.5)


def test_the_factory_gives_each_environment_its_serial_and_steps_report_a_typed_info() -> None:
    envs = make_sim_envs(quiet(screenshots=False), 2, serial_prefix="sim-c0")
    assert [env.serial for env in envs] == ["sim-c0-0", "sim-c0-1"]
    env = make_env(quiet(screenshots=False, serial="emulator-5556"))
    env.reset(OPEN_APP)
    result = env.step("status(complete)")
    assert isinstance(result.info, StepInfo)
    assert (result.info.serial, result.info.step, result.info.action) == (
        "emulator-5556",
        1,
        "status(complete)",
    )
    env.close()
    with pytest.raises(RuntimeError, match="reset"):
        env.step("status(complete)")
