"""AndroidWorld-style rule checks over ADB (adbutils -> fake ADB server -> SimDroid on loopback)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import adbutils
import pytest

from distrl_core.evaluators.base import EpisodeContext, Evaluator, Verdict
from simulators.adb import AdbEnv, AdbEnvConfig, simdroid_task_loader
from simulators.adb_checks import (
    STARTER_TASK_BY_ID,
    AdbRuleEvaluator,
    adb_rule_success_check,
    rules_for_simdroid_task,
)
from simulators.fake_adb import FakeAdbConfig, FakeAdbServer
from simulators.simdroid import FaultConfig, load_tasks
from simulators.simdroid.catalog import SETTINGS
from simulators.simdroid.expert import expert_action

SERIAL = "emulator-5554"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeAdbServer]:
    monkeypatch.setenv("ADBUTILS_ADB_PATH", "/bin/false")  # never spawn a real adb daemon
    token = tmp_path / "token"
    token.write_text("t")
    with FakeAdbServer(FakeAdbConfig(devices=1, console_auth_token_path=token)) as running:
        yield running


@pytest.fixture
def device(server: FakeAdbServer) -> adbutils.AdbDevice:
    return adbutils.AdbClient("127.0.0.1", server.port).device(SERIAL)


def verdict(device: adbutils.AdbDevice, task: object) -> Verdict:
    return AdbRuleEvaluator().evaluate(EpisodeContext(instruction="", task=task, device=device)).verdict


def test_evaluator_satisfies_the_evaluator_protocol() -> None:
    assert isinstance(AdbRuleEvaluator(), Evaluator)


def test_wifi_toggle_task_reads_settings_get(device: adbutils.AdbDevice) -> None:
    wifi_off = STARTER_TASK_BY_ID["adb-wifi-off"]
    wifi_on = STARTER_TASK_BY_ID["adb-wifi-on"]
    assert device.shell("settings get global wifi_on") == "1"  # SimDroid's default
    assert (verdict(device, wifi_off), verdict(device, wifi_on)) == (Verdict.FAILURE, Verdict.SUCCESS)
    device.shell("svc wifi disable")
    assert (verdict(device, wifi_off), verdict(device, wifi_on)) == (Verdict.SUCCESS, Verdict.FAILURE)


def test_open_app_task_reads_the_current_activity(device: adbutils.AdbDevice) -> None:
    task = STARTER_TASK_BY_ID["adb-open-settings"]
    assert verdict(device, task) is Verdict.FAILURE  # on the launcher
    device.shell(f"monkey -p {SETTINGS} -c android.intent.category.LAUNCHER 1")
    assert verdict(device, task) is Verdict.SUCCESS
    assert verdict(device, STARTER_TASK_BY_ID["adb-open-clock"]) is Verdict.FAILURE


def test_ui_text_check_needs_the_text_on_screen(server: FakeAdbServer, device: adbutils.AdbDevice) -> None:
    task = STARTER_TASK_BY_ID["adb-display-settings"]
    device.shell(f"monkey -p {SETTINGS} -c android.intent.category.LAUNCHER 1")
    result = AdbRuleEvaluator().evaluate(EpisodeContext(instruction="", task=task, device=device))
    assert result.verdict is Verdict.FAILURE and "no screen text matches 'Brightness level'" in result.reason
    display_row = next(e for e in server.device(SERIAL).phone.elements() if e.text == "Display")
    device.click(*display_row.center)
    assert verdict(device, task) is Verdict.SUCCESS


def make_env(server: FakeAdbServer, **overrides: object) -> AdbEnv:
    settings: dict = {
        "port": server.port,
        "serial": SERIAL,
        "settle_delay_s": 0.0,
        "screenshots": False,
        "task_loader": simdroid_task_loader,
    }
    settings.update(overrides)
    return AdbEnv(AdbEnvConfig(**settings))


def test_rules_for_simdroid_tasks_agree_with_the_simulator(
    server: FakeAdbServer, device: adbutils.AdbDevice
) -> None:
    fake = server.device(SERIAL)
    env = make_env(server)  # no success_check: the episode runs until the expert says complete
    observable = [task for task in load_tasks("general", "test") if rules_for_simdroid_task(task) is not None]
    assert {task.kind for task in observable} == {"open_app", "toggle_setting", "set_brightness"}
    for task in observable[::5]:
        env.reset(task)
        assert verdict(device, task) is Verdict.FAILURE, task.task_id
        for _ in range(task.horizon):
            with fake.lock:
                action = expert_action(fake.phone, task)
            if env.step(action).done:
                break
        assert fake.phone.is_successful(task), task.task_id
        assert verdict(device, task) is Verdict.SUCCESS, task.task_id


def test_tasks_without_rules_and_missing_devices_are_unknown(device: adbutils.AdbDevice) -> None:
    alarm = next(task for task in load_tasks("general", "train") if task.kind == "set_alarm")
    assert verdict(device, alarm) is Verdict.UNKNOWN
    assert verdict(None, STARTER_TASK_BY_ID["adb-wifi-on"]) is Verdict.UNKNOWN  # type: ignore[arg-type]


def test_offline_device_gives_unknown_never_success(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ADBUTILS_ADB_PATH", "/bin/false")
    token = tmp_path / "token"
    token.write_text("t")
    config = FakeAdbConfig(
        devices=1, faults=FaultConfig(offline_prob=1.0, offline_duration_s=60), console_auth_token_path=token
    )
    with FakeAdbServer(config) as offline_server:
        device = adbutils.AdbClient("127.0.0.1", offline_server.port).device(SERIAL)
        device.shell("input keyevent 3")  # the first input action takes it offline
        result = AdbRuleEvaluator().evaluate(
            EpisodeContext(instruction="", task=STARTER_TASK_BY_ID["adb-wifi-on"], device=device)
        )
    assert result.verdict is Verdict.UNKNOWN and "device check failed" in result.reason


def test_rule_success_check_ends_an_adb_env_episode(server: FakeAdbServer) -> None:
    task = next(
        t
        for t in load_tasks("general", "train")
        if t.kind == "toggle_setting" and t.params["setting"] == "wifi"
    )
    env = AdbEnv(
        AdbEnvConfig(
            port=server.port,
            serial=SERIAL,
            settle_delay_s=0.0,
            screenshots=False,
            task_loader=simdroid_task_loader,
            success_check=adb_rule_success_check,
        )
    )
    env.reset(task)
    fake = server.device(SERIAL)
    result = None
    for _ in range(task.horizon):
        with fake.lock:
            action = expert_action(fake.phone, task)
        result = env.step(action)
        if result.done:
            break
    assert result is not None and result.done and result.info.success and result.reward == 1.0
