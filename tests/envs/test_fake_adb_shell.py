"""The fake device's shell: Android commands mapped onto a real SimDroid, and the shell syntax ADB
clients send (quoting, ``;``/``&&``/``||``, ``$?``, pipes into grep, redirections)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distrl_core.envs.observation import parse_ui_xml
from simulators.adb.commands import input_text_argument
from simulators.fake_adb.device import FakeDevice
from simulators.fake_adb.shell import run_shell
from simulators.fake_adb.shell_syntax import ShellSyntaxError, parse
from simulators.simdroid import SimDroid, get_task, load_tasks
from simulators.simdroid.catalog import CHROME, CLOCK, LAUNCHER, SETTINGS


@pytest.fixture
def device() -> FakeDevice:
    return FakeDevice(SimDroid(serial="emulator-5554"), transport_id=1)


def sh(device: FakeDevice, line: str) -> tuple[str, str, int]:
    result = run_shell(device, line)
    return result.stdout.decode(), result.stderr.decode(), result.exit_code


def first_task(kind: str, family: str = "general"):
    return next(task for task in load_tasks(family, "train") if task.kind == kind)


def tap_element(device: FakeDevice, label: str) -> None:
    element = next(e for e in device.phone.elements() if e.label == label)
    x, y = element.center
    assert sh(device, f"input tap {x} {y}")[2] == 0


def test_input_tap_on_the_launcher_opens_an_app(device: FakeDevice) -> None:
    sh(device, f"simdroid load-task {first_task('open_app').task_id}")
    assert device.phone.current_activity().startswith(LAUNCHER)
    tap_element(device, "Settings")
    assert device.phone.current_activity().startswith(SETTINGS)


def test_input_text_with_percent_s_types_spaces_and_enter_submits(device: FakeDevice) -> None:
    task = first_task("web_search")
    sh(device, f"simdroid load-task {task.task_id}")
    assert sh(device, "am start -n com.android.chrome/com.google.android.apps.chrome.Main")[2] == 0
    url_bar = next(e for e in device.phone.elements() if e.editable)
    x, y = url_bar.center
    query = task.params["query"]
    line = f"input tap {x} {y} && input text {input_text_argument(query)} && input keyevent KEYCODE_ENTER"
    assert sh(device, line) == ("", "", 0)
    assert device.phone.is_successful(task)
    assert sh(device, f"simdroid is-successful {task.task_id}")[0] == "true\n"


def test_keyevent_accepts_numbers_and_names(device: FakeDevice) -> None:
    sh(device, "monkey -p com.android.settings -c android.intent.category.LAUNCHER 1")
    assert device.phone.current_activity().startswith(SETTINGS)
    sh(device, "input keyevent HOME")
    assert device.phone.current_activity().startswith(LAUNCHER)
    sh(device, "monkey -p com.android.settings -c android.intent.category.LAUNCHER 1")
    sh(device, "input keyevent 3")
    assert device.phone.current_activity().startswith(LAUNCHER)


def test_swipe_in_place_held_long_is_a_long_press_and_bad_arguments_print_usage(device: FakeDevice) -> None:
    element = next(e for e in device.phone.elements() if e.label == "Clock")
    x, y = element.center
    assert sh(device, f"input touchscreen swipe {x} {y} {x} {y} 800")[2] == 0
    assert device.phone.current_activity().startswith(CLOCK)
    _, err, code = sh(device, "input tap ten 20")
    assert code == 1 and err.startswith("Error:") and "Usage: input" in err


def test_am_start_monkey_and_force_stop(device: FakeDevice) -> None:
    out, _, code = sh(device, "am start -W -n com.android.chrome/com.google.android.apps.chrome.Main")
    assert (
        code == 0
        and out == "Starting: Intent { cmp=com.android.chrome/com.google.android.apps.chrome.Main }\n"
    )
    assert device.phone.current_activity().startswith(CHROME)
    sh(device, "am force-stop com.android.chrome")
    assert device.phone.current_activity().startswith(LAUNCHER)
    out, _, code = sh(device, "monkey -p com.not.installed -c android.intent.category.LAUNCHER 1")
    assert code == 252 and "No activities found" in out
    _, err, code = sh(device, "am start -n com.not.installed/.Main")
    assert code == 1 and "does not exist" in err


def test_settings_get_put_and_svc_wifi(device: FakeDevice) -> None:
    assert sh(device, "settings put global airplane_mode_on 1") == ("", "", 0)
    assert sh(device, "settings get global airplane_mode_on") == ("1\n", "", 0)
    assert sh(device, "settings get secure no_such_key")[0] == "null\n"
    sh(device, "svc wifi disable")
    assert device.phone.settings_get("global", "wifi_on") == "0"
    assert sh(device, "settings get bogus x")[2] != 0


def test_dumpsys_window_and_activity_name_the_foreground_activity(device: FakeDevice) -> None:
    sh(device, "monkey -p com.android.settings -c android.intent.category.LAUNCHER 1")
    component = device.phone.current_activity()
    window = sh(device, "dumpsys window windows")[0]
    activities = sh(device, "dumpsys activity activities")[0]
    package, activity = component.split("/")
    full = package + activity if activity.startswith(".") else activity
    assert f" u0 {package}/{full}}}" in window and "mCurrentFocus=Window{" in window
    assert "mResumedActivity: ActivityRecord{" in activities and f" u0 {component} t" in activities


def test_wm_size_getprop_and_unknown_command(device: FakeDevice) -> None:
    assert sh(device, "wm size") == ("Physical size: 1080x2400\n", "", 0)
    assert sh(device, "getprop ro.serialno")[0] == "emulator-5554\n"
    assert "[ro.build.version.sdk]: [34]" in sh(device, "getprop")[0]
    assert sh(device, "cmd package list") == ("", "/system/bin/sh: cmd: inaccessible or not found\n", 127)


def test_uiautomator_dump_writes_the_file_cat_reads_it_rm_removes_it(device: FakeDevice) -> None:
    out, _, code = sh(device, "uiautomator dump")
    assert (out, code) == ("UI hierchary dumped to: /sdcard/window_dump.xml\n", 0)
    xml = sh(device, "cat /sdcard/window_dump.xml")[0]
    assert [e.label for e in parse_ui_xml(xml)] == [e.label for e in device.phone.elements()]
    assert sh(device, "rm /sdcard/window_dump.xml")[2] == 0
    assert sh(device, "cat /sdcard/window_dump.xml") == (
        "",
        "cat: /sdcard/window_dump.xml: No such file or directory\n",
        1,
    )
    assert (
        sh(device, "uiautomator dump /sdcard/other.xml")[0] == "UI hierchary dumped to: /sdcard/other.xml\n"
    )


def test_uiautomator_idle_state_fault_is_seeded_and_reported() -> None:
    def errors(seed: int) -> list[bool]:
        device = FakeDevice(SimDroid(), transport_id=1, idle_error_prob=0.5, seed=seed)
        outcomes = []
        for _ in range(40):
            _, err, code = sh(device, "uiautomator dump")
            outcomes.append(code != 0)
            assert (err == "ERROR: could not get idle state.\n") == (code != 0)
        return outcomes

    first = errors(seed=3)
    assert first == errors(seed=3) and 5 < sum(first) < 35
    assert first != errors(seed=4)


def test_exit_status_chains_pipes_and_redirections(device: FakeDevice) -> None:
    assert sh(device, "false; echo X4EXIT:$?") == ("X4EXIT:1\n", "", 0)
    assert sh(device, "true && echo yes || echo no") == ("yes\n", "", 0)
    assert sh(device, "false && echo yes || echo no") == ("no\n", "", 0)
    assert sh(device, "echo 'a  b' \"c $?\" d\\ e") == ("a  b c 0 d e\n", "", 0)
    assert sh(device, "echo '$?'")[0] == "$?\n"  # single quotes keep it literal, as in sh
    assert sh(device, "dumpsys window | grep -E mCurrentFocus")[0].strip().startswith("mCurrentFocus=")
    assert sh(device, "echo hidden > /sdcard/out.txt; cat /sdcard/out.txt") == ("hidden\n", "", 0)
    assert sh(device, "cat /missing > /sdcard/err.txt 2>&1; cat /sdcard/err.txt")[0].startswith(
        "cat: /missing"
    )
    assert sh(device, "cat /missing 2>/dev/null") == ("", "", 1)
    assert sh(device, "echo a; exit 3; echo never") == ("a\n", "", 3)


def test_syntax_errors_exit_2(device: FakeDevice) -> None:
    for line in ("echo 'open", "| grep x", "echo a &&", "echo >"):
        _, err, code = sh(device, line)
        assert code == 2 and err.startswith("/system/bin/sh:"), line


def test_load_task_rejects_unknown_tasks_and_reports_failed_resets() -> None:
    from simulators.simdroid import FaultConfig, SimDroidConfig

    device = FakeDevice(SimDroid(SimDroidConfig(faults=FaultConfig(reset_fail_prob=1.0))), transport_id=1)
    assert sh(device, "simdroid load-task nope")[1].startswith("simdroid: unknown task 'nope'")
    task_id = get_task("general-train-0001").task_id
    _, err, code = sh(device, f"simdroid load-task {task_id}")
    assert code == 1 and f"load-task {task_id} failed" in err


# Text an agent may type: printable characters, including every shell metacharacter and quote.
typed_text = st.text(
    alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FF, exclude_characters="\x7f"), max_size=40
).filter(lambda text: "%s" not in text)


@settings(max_examples=300, deadline=None)
@given(typed_text)
def test_input_text_quoting_survives_the_device_shell_unchanged(text: str) -> None:
    pipelines = parse(f"input text {input_text_argument(text)}")
    assert len(pipelines) == 1 and len(pipelines[0].commands) == 1
    words = [word.expand(0) for word in pipelines[0].commands[0].words]
    assert words[:2] == ["input", "text"]
    assert " ".join(words[2:]).replace("%s", " ") == text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab '\"\\;&|>$?21 ")), max_size=30))
def test_parser_gives_well_formed_pipelines_or_a_syntax_error(line: str) -> None:
    try:
        pipelines = parse(line)
    except ShellSyntaxError as error:
        assert str(error)
        return
    for pipeline in pipelines:
        assert pipeline.run_if in (";", "&&", "||")
        assert pipeline.commands and all(command.words for command in pipeline.commands)
