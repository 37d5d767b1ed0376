"""Action -> shell command translation, frame checks and config validation of the ADB environment."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from distrl_core.envs.actions import Action
from distrl_core.envs.observation import UIElement
from simulators.adb import AdbEnvConfig
from simulators.adb.commands import UnexecutableAction, action_to_commands, type_text_commands
from simulators.adb.frames import frame_problem
from simulators.adb.link import short_component
from simulators.simdroid import SimDroid

SIZE = (1080, 2400)
ELEMENTS = [
    UIElement(index=0, text="Wi-Fi", bounds=(0, 300, 1080, 420), clickable=True),
    UIElement(index=1, text="Search", bounds=(40, 160, 1040, 260), editable=True),
]


@pytest.mark.parametrize(
    ("action", "commands"),
    [
        (Action.tap(0), ["input tap 540 360"]),
        (Action.tap(point=(0.5, 0.25)), ["input tap 540 600"]),
        (Action.long_press(1), ["input swipe 540 210 540 210 800"]),
        (Action.swipe("up"), ["input swipe 540 1680 540 720 300"]),
        (Action.swipe(start=(0.1, 0.2), end=(0.9, 0.2)), ["input swipe 108 480 972 480 300"]),
        (Action.type_text("it's a test"), ["input text 'it'\"'\"'s%sa%stest'"]),
        (Action.press("ENTER"), ["input keyevent 66"]),
        (
            Action.open_app("Settings"),
            ["monkey -p com.android.settings -c android.intent.category.LAUNCHER 1"],
        ),
        (
            Action.open_app("com.example.app"),
            ["monkey -p com.example.app -c android.intent.category.LAUNCHER 1"],
        ),
        (Action.complete(), []),
    ],
)
def test_actions_become_input_commands(action: Action, commands: list[str]) -> None:
    assert action_to_commands(action, ELEMENTS, SIZE) == commands


def test_actions_that_cannot_run_on_this_screen_are_rejected() -> None:
    with pytest.raises(UnexecutableAction, match="index 5 is not on screen"):
        action_to_commands(Action.tap(5), ELEMENTS, SIZE)
    with pytest.raises(UnexecutableAction, match="app_packages"):
        action_to_commands(Action.open_app("Not An App"), ELEMENTS, SIZE)


def test_newlines_in_typed_text_become_enter_presses() -> None:
    assert type_text_commands("a b\nc") == ["input text a%sb", "input keyevent 66", "input text c"]


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def test_frame_problems_are_detected_and_real_screens_pass() -> None:
    screen = SimDroid().screenshot_png()
    assert frame_problem(screen) is None
    assert "undecodable" in (frame_problem(screen[: len(screen) // 2]) or "")
    assert "not a PNG" in (frame_problem(b"garbage") or "")
    assert frame_problem(_png(Image.new("RGB", (270, 600), (0, 0, 0)))) == "all-black frame"
    assert frame_problem(_png(Image.new("RGB", (270, 600), (255, 255, 255)))) == "all-white frame"
    dark_ui = Image.new("RGB", (270, 600), (0, 0, 0))
    dark_ui.paste((200, 200, 200), (0, 0, 270, 40))  # a dark theme with a status bar is a fine frame
    assert frame_problem(_png(dark_ui)) is None


def test_component_names_are_shortened_like_activity_manager_prints_them() -> None:
    assert (
        short_component("com.android.settings/com.android.settings.Settings")
        == "com.android.settings/.Settings"
    )
    assert short_component("com.android.chrome/com.google.Main") == "com.android.chrome/com.google.Main"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"port": 0}, "port must be 1..65535"),
        ({"step_timeout_s": 0}, "step_timeout_s must be > 0"),
        ({"ui_dump_retries": -1}, "ui_dump_retries must be >= 0"),
        ({"reset_mode": "reboot"}, "reset_mode must be 'snapshot'"),
        ({"reset_mode": "snapshot", "serial": "R58M123"}, "needs console_port"),
        ({"pull_with": "ftp"}, "pull_with must be 'sync' or 'cat'"),
        ({"invalid_action_penalty": 0.5}, "is a penalty"),
        ({"dump_path": "window.xml"}, "absolute device path"),
    ],
)
def test_config_errors_name_the_field_and_the_fix(overrides: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AdbEnvConfig(**overrides)
