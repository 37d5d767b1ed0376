"""AdbEnv end to end: adbutils -> fake ADB server (real sockets) -> SimDroid, driven by the scripted expert.

The expert reads the simulated phone directly (it is a test oracle); everything the environment does goes
over the ADB wire protocol. Fault injection comes from SimDroid's seeded fault model and the server's
uiautomator idle-state fault.
"""

from __future__ import annotations

import io
import socket
from collections.abc import Callable
from typing import Any

import pytest
from PIL import Image

from distrl_core.envs.actions import Action
from distrl_core.envs.protocol import StepResult
from simulators.adb import (
    AdbConnectionError,
    AdbEnv,
    AdbEnvConfig,
    DeviceOfflineError,
    ResetError,
    ScreenshotError,
    StepTimeoutError,
    UiDumpError,
    simdroid_success_check,
    simdroid_task_loader,
)
from simulators.adb.frames import frame_problem
from simulators.adb.link import AdbDeviceLink
from simulators.fake_adb import FakeAdbServer
from simulators.simdroid import FaultConfig, SimDroidConfig, Task, load_tasks
from simulators.simdroid.expert import expert_action

SERIAL = "emulator-5554"


def make_env(server: FakeAdbServer, **overrides: Any) -> AdbEnv:
    settings: dict[str, Any] = {
        "port": server.port,
        "serial": SERIAL,
        "settle_delay_s": 0.0,
        "retry_delay_s": 0.0,
        "task_loader": simdroid_task_loader,
        "success_check": simdroid_success_check,
        "step_timeout_s": 10.0,
    }
    settings.update(overrides)
    return AdbEnv(AdbEnvConfig(**settings))


def run_expert(
    env: AdbEnv, server: FakeAdbServer, task: Task, seed: int = 0, max_steps: int | None = None
) -> StepResult:
    device = server.device(SERIAL)
    env.reset(task, seed=seed)
    result = None
    for _ in range(max_steps or task.horizon):
        with device.lock:  # the oracle reads the phone; nobody else may change it meanwhile
            action = expert_action(device.phone, task)
        result = env.step(action)
        if result.done:
            break
    assert result is not None
    return result


def pick(family: str, split: str, kinds: tuple[str, ...]) -> list[Task]:
    tasks = load_tasks(family, split)
    return [next(task for task in tasks if task.kind == kind) for kind in kinds]


EXPERT_TASKS = [
    *pick("general", "train", ("open_app", "toggle_setting", "set_alarm", "web_search", "set_brightness")),
    *pick("general", "test", ("toggle_setting", "web_search")),
    *pick("webshop", "train", ("shop_add_to_cart",)),
    *pick("webshop", "test", ("shop_search", "shop_add_to_cart")),
]


def test_expert_solves_general_and_webshop_train_and_test_tasks_over_adb(
    start_fake_adb: Callable[..., FakeAdbServer],
) -> None:
    server = start_fake_adb(devices=1)
    env = make_env(server)
    for task in EXPERT_TASKS:
        result = run_expert(env, server, task)
        assert result.done and result.info.success and result.reward == 1.0, (task.task_id, result.info)
        assert server.device(SERIAL).phone.is_successful(task)


def test_observation_mirrors_the_device(start_fake_adb: Callable[..., FakeAdbServer]) -> None:
    server = start_fake_adb(devices=2)
    task = EXPERT_TASKS[3]
    env = make_env(server, serial="emulator-5556")
    observation = env.reset(task)
    phone = server.device("emulator-5556").phone
    assert [(e.text, e.bounds, e.clickable) for e in observation.elements] == [
        (e.text, e.bounds, e.clickable) for e in phone.elements()
    ]
    assert observation.instruction == task.instruction and observation.step == 0
    assert observation.screen_size == (1080, 2400)
    assert observation.activity == phone.current_activity()
    assert observation.ui_text.startswith("[0] ")
    assert observation.screenshot_png is not None
    assert Image.open(io.BytesIO(observation.screenshot_png)).size == (1080, 2400)  # what `wm size` says
    assert observation.extras["serial"] == "emulator-5556"


def test_invalid_actions_do_nothing_and_status_ends_the_episode(
    start_fake_adb: Callable[..., FakeAdbServer],
) -> None:
    server = start_fake_adb(devices=1)
    env = make_env(server, screenshots=False, invalid_action_penalty=-0.1)
    task = EXPERT_TASKS[0]
    env.reset(task)
    before = server.device(SERIAL).phone.snapshot()
    for action, reason in (
        ("tap(", None),  # unparseable: the parser's own reason
        (Action.tap(999), "not on screen"),
        (Action.open_app("No Such App"), "no package known"),
    ):
        result = env.step(action)
        assert result.info.invalid and result.info.invalid_reason
        assert reason is None or reason in result.info.invalid_reason
        assert result.reward == pytest.approx(-0.1) and not result.done
    assert server.device(SERIAL).phone.snapshot() == before
    result = env.step(Action.complete())
    assert result.done and not result.truncated and result.reward == 0.0 and not result.info.success
    with pytest.raises(RuntimeError, match="reset"):
        env.step(Action.press("BACK"))


def test_horizon_truncates_the_episode(start_fake_adb: Callable[..., FakeAdbServer]) -> None:
    server = start_fake_adb(devices=1)
    env = make_env(server, screenshots=False, max_steps=2)
    env.reset(EXPERT_TASKS[1])
    assert not env.step(Action.press("HOME")).done
    result = env.step(Action.press("HOME"))
    assert result.done and result.truncated and result.info.truncated and result.reward == 0.0


def test_dropped_taps_corrupt_frames_idle_errors_and_dialogs_are_survived(
    start_fake_adb: Callable[..., FakeAdbServer],
) -> None:
    faults = FaultConfig(seed=3, drop_tap_prob=0.4, corrupt_screenshot_prob=0.3)
    phones = SimDroidConfig(distractor_prob=0.3)
    server = start_fake_adb(devices=1, faults=faults, idle_error_prob=0.3, simdroid=phones)
    env = make_env(server, screenshot_retries=6, ui_dump_retries=6)
    device = server.device(SERIAL)
    frames, dialogs = [], 0
    for task in (EXPERT_TASKS[1], EXPERT_TASKS[3], EXPERT_TASKS[8]):
        observation = env.reset(task)
        for _ in range(3 * task.horizon):
            dialogs += any(e.resource_id.startswith("android:id/button") for e in observation.elements)
            frames.append(observation.screenshot_png)
            with device.lock:
                action = expert_action(device.phone, task)
            result = env.step(action)
            observation = result.observation
            if result.done:
                break
        assert result.info.success, task.task_id
    counts = device.phone.faults.counts
    assert counts["dropped_taps"] > 0 and counts["corrupt_screenshots"] > 0 and dialogs > 0
    assert all(frame is not None and frame_problem(frame) is None for frame in frames)


def test_device_going_offline_is_waited_out(start_fake_adb: Callable[..., FakeAdbServer]) -> None:
    server = start_fake_adb(devices=1, faults=FaultConfig(seed=2, offline_prob=0.2, offline_duration_s=0.2))
    env = make_env(server, screenshots=False, reconnect_attempts=8, reconnect_backoff_s=0.05)
    waits = 0
    for task in (EXPERT_TASKS[1], EXPERT_TASKS[2]):
        result = run_expert(env, server, task, max_steps=3 * task.horizon)
        assert result.info.success, task.task_id
        waits += env.link.reconnects
    assert server.device(SERIAL).phone.faults.counts["offline_events"] > 0 and waits > 0


def test_device_that_stays_offline_raises_device_offline_error(
    start_fake_adb: Callable[..., FakeAdbServer],
) -> None:
    server = start_fake_adb(devices=1, faults=FaultConfig(offline_prob=1.0, offline_duration_s=60.0))
    env = make_env(server, screenshots=False, reconnect_attempts=2, reconnect_backoff_s=0.01)
    with pytest.raises(DeviceOfflineError, match=SERIAL) as caught:
        env.reset(EXPERT_TASKS[0])
    assert "offline" in str(caught.value) and caught.value.serial == SERIAL


@pytest.mark.parametrize(
    ("overrides", "server_options", "error"),
    [
        ({"screenshot_retries": 1}, {"faults": FaultConfig(corrupt_screenshot_prob=1.0)}, ScreenshotError),
        ({"ui_dump_retries": 2}, {"idle_error_prob": 1.0}, UiDumpError),
        ({"reset_retries": 2}, {"faults": FaultConfig(reset_fail_prob=1.0)}, ResetError),
        ({"reset_commands": ("false",), "reset_retries": 0}, {}, ResetError),
    ],
)
def test_persistent_faults_surface_as_typed_errors_naming_the_device(
    start_fake_adb: Callable[..., FakeAdbServer],
    overrides: dict,
    server_options: dict,
    error: type[Exception],
) -> None:
    server = start_fake_adb(devices=1, **server_options)
    env = make_env(server, **overrides)
    with pytest.raises(error, match=SERIAL):
        env.reset(EXPERT_TASKS[0])


def test_flaky_resets_are_retried(start_fake_adb: Callable[..., FakeAdbServer]) -> None:
    server = start_fake_adb(devices=1, faults=FaultConfig(seed=1, reset_fail_prob=0.5))
    env = make_env(server, screenshots=False, reset_retries=8)
    for task in EXPERT_TASKS[:4]:
        assert env.reset(task).instruction == task.instruction
    assert server.device(SERIAL).phone.faults.counts["failed_resets"] > 0


def test_slow_command_raises_step_timeout(start_fake_adb: Callable[..., FakeAdbServer]) -> None:
    server = start_fake_adb(devices=1)
    link = AdbDeviceLink(AdbEnvConfig(port=server.port, serial=SERIAL, step_timeout_s=0.3))
    link.connect()
    with pytest.raises(StepTimeoutError, match="step_timeout_s"):
        link.shell("sleep 5", idempotent=True)
    assert link.shell("echo still-here", idempotent=True).stdout == b"still-here\n"


def test_no_adb_server_raises_connection_error_without_spawning_adb(no_adb_daemon: None) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    env = AdbEnv(AdbEnvConfig(port=port, serial=SERIAL))
    with pytest.raises(AdbConnectionError, match=f"127.0.0.1:{port}"):
        env.reset(EXPERT_TASKS[0])


def test_snapshot_reset_through_the_emulator_console(
    start_fake_adb: Callable[..., FakeAdbServer], console_token
) -> None:
    from simulators.adb import EmulatorConsole

    server = start_fake_adb(devices=1)
    task = EXPERT_TASKS[1]  # toggle a setting
    port = server.console_port(SERIAL)
    setup = make_env(server, screenshots=False)
    setup.reset(task)
    with EmulatorConsole("127.0.0.1", port, console_token) as console:
        console.snapshot_save("task-start")
    solved = run_expert(setup, server, task)
    assert solved.info.success

    env = make_env(
        server,
        screenshots=False,
        reset_mode="snapshot",
        snapshot_name="task-start",
        console_port=port,
        console_auth_token_path=console_token,
        task_loader=None,
    )
    env.reset(task)  # back to the saved start state: the task is unsolved again
    assert not server.device(SERIAL).phone.is_successful(task)
    assert run_expert(env, server, task).info.success

    missing = make_env(
        server,
        reset_mode="snapshot",
        snapshot_name="nope",
        console_port=port,
        console_auth_token_path=console_token,
    )
    with pytest.raises(ResetError, match="snapshot 'nope' does not exist"):
        missing.reset(task)
