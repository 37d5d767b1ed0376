"""Shell commands that touch the screen: ``input``, ``screencap`` and ``uiautomator dump``.

They mirror Android's own tools closely enough for clients written against real devices: ``input``
takes an optional source word (``input touchscreen tap``), accepts float coordinates, several key codes
in one ``keyevent``, and ``%s`` for a space in ``input text``; ``uiautomator dump`` writes a file and
prints Android's (misspelt) confirmation line, or ``ERROR: could not get idle state.`` when the fault
model says the screen never settled.
"""

from __future__ import annotations

import numpy as np

from simulators.fake_adb.commands_system import ShellOutput
from simulators.fake_adb.device import FakeDevice, SimulatedPhone
from simulators.screen_frames import encode_screencap

DEFAULT_DUMP_PATH = "/sdcard/window_dump.xml"
IDLE_STATE_ERROR = "ERROR: could not get idle state."
# `input swipe` from a point to itself held at least this long is how shells long-press.
LONG_PRESS_MIN_MS = 500
_INPUT_SOURCES = {
    "touchscreen",
    "touchpad",
    "keyboard",
    "mouse",
    "stylus",
    "trackball",
    "dpad",
    "gamepad",
    "joystick",
}
_INPUT_USAGE = (
    "Usage: input [<source>] <command> [<arg>...]\n"
    "  text <string>  (%s types a space)\n"
    "  keyevent [--longpress] <key code number or name> ...\n"
    "  tap <x> <y>\n"
    "  swipe <x1> <y1> <x2> <y2> [duration(ms)]\n"
    "  draganddrop <x1> <y1> <x2> <y2> [duration(ms)]\n"
)


def _usage_error(problem: str) -> ShellOutput:
    return ShellOutput(stderr=f"Error: {problem}\n{_INPUT_USAGE}".encode(), exit_code=1)


def _numbers(values: list[str]) -> list[int]:
    return [round(float(value)) for value in values]


def input_command(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    args = _without_options(args)
    if not args:
        return _usage_error("no input command given")
    command, rest = args[0], args[1:]
    try:
        performed = _perform(device.phone, command, rest)
    except ValueError as error:  # a non-numeric coordinate, or a key code the phone does not know
        return _usage_error(str(error))
    return ShellOutput() if performed else _usage_error(f"bad arguments for '{command}': {rest}")


def _without_options(args: list[str]) -> list[str]:
    """The arguments after the optional source word and ``-d <display>``."""
    if args and args[0] in _INPUT_SOURCES:
        args = args[1:]
    if len(args) >= 2 and args[0] == "-d":  # display id: there is one display
        args = args[2:]
    return args


def _perform(phone: SimulatedPhone, command: str, rest: list[str]) -> bool:
    """Run ``input <command> <rest...>`` on the phone; False when the arguments do not fit it."""
    if command == "tap" and len(rest) == 2:
        phone.tap(*_numbers(rest))
    elif command in ("swipe", "draganddrop") and len(rest) in (4, 5):
        _drag(phone, command, rest)
    elif command == "text" and rest:
        phone.input_text(" ".join(rest).replace("%s", " "))
    elif command == "keyevent" and rest:
        for code in rest:
            if code not in ("--longpress", "--doubletap"):
                phone.keyevent(_key(code))
    else:
        return False
    return True


def _drag(phone: SimulatedPhone, command: str, rest: list[str]) -> None:
    x1, y1, x2, y2 = _numbers(rest[:4])
    default_ms = 300 if command == "swipe" else 2000
    duration_ms = _numbers(rest[4:])[0] if len(rest) == 5 else default_ms
    if (x1, y1) == (x2, y2) and duration_ms >= LONG_PRESS_MIN_MS:
        phone.long_press(x1, y1, duration_ms)
    else:
        phone.swipe(x1, y1, x2, y2, duration_ms)


def _key(code: str) -> int | str:
    if code.isdigit():
        return int(code)
    name = code.upper()
    return name if name.startswith("KEYCODE_") else f"KEYCODE_{name}"


def screencap(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    """``screencap -p`` (or a ``.png`` path) writes a PNG; plain ``screencap`` the raw frame, a
    little-endian header and RGBA pixels (``simulators.screen_frames``), its header 16 bytes on
    Android 9 (API 28) and later, 12 before, as ``ro.build.version.sdk`` says."""
    flags = [arg for arg in args if arg.startswith("-")]
    paths = [arg for arg in args if not arg.startswith("-") and not arg.isdigit()]
    png = "-p" in flags or any(path.endswith(".png") for path in paths)
    image = device.phone.screenshot_png() if png else _raw_frame(device)
    if not paths:
        return ShellOutput(stdout=image)
    try:
        device.files.write(paths[0], image)
    except IsADirectoryError:
        return ShellOutput(stderr=f"Error opening file: {paths[0]} (Is a directory)\n".encode(), exit_code=1)
    return ShellOutput()


def _raw_frame(device: FakeDevice) -> bytes:
    colour_space = int(device.properties.get("ro.build.version.sdk", "34")) >= 28
    pixels = device.phone.screenshot_pixels()
    if pixels is not None:
        return encode_screencap(pixels, colour_space)
    # The phone's capture failed (SimDroid's truncated frame): a frame cut short, as a PNG is.
    width, height = device.phone.shot_size
    frame = encode_screencap(np.zeros((height, width, 3), np.uint8), colour_space)
    return frame[: len(frame) // 2]


def uiautomator(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    if not args or args[0] != "dump":
        return ShellOutput(stderr=b"Usage: uiautomator dump [--compressed] [file]\n", exit_code=1)
    paths = [arg for arg in args[1:] if not arg.startswith("--")]
    path = paths[0] if paths else DEFAULT_DUMP_PATH
    if device.draw_idle_state_error():
        return ShellOutput(stderr=f"{IDLE_STATE_ERROR}\n".encode(), exit_code=1)
    xml = device.phone.ui_xml().encode()
    if path in ("/dev/tty", "/dev/stdout"):
        return ShellOutput(stdout=xml + f"UI hierchary dumped to: {path}\n".encode())
    try:
        device.files.write(path, xml)
    except IsADirectoryError:
        return ShellOutput(stderr=f"ERROR: {path} is a directory\n".encode(), exit_code=1)
    return ShellOutput(stdout=f"UI hierchary dumped to: {path}\n".encode())


COMMANDS = {"input": input_command, "screencap": screencap, "uiautomator": uiautomator}
