"""``screenrecord``: records the SimDroid screen into an MP4 file on the device.

Like the device's tool it runs until its time limit (``--time-limit``, 180 s by default and at most) or
until SIGINT/SIGHUP (``kill -INT``), then finishes the file; any other signal kills it before the file is
written. adbutils' ``start_recording`` runs it in the background of a pushed script and stops it with
``kill -INT``. The fake samples the screen every ``FRAME_INTERVAL_S`` and keeps a frame each time it
changes, for as long as it stays, so a still screen is one frame. The file is Motion JPEG in MP4, not
H.264 (see :mod:`mp4`).
"""

from __future__ import annotations

import io
import re
import signal
import threading
import time

from PIL import Image

from simulators.fake_adb.commands_system import ShellOutput
from simulators.fake_adb.device import FakeDevice
from simulators.fake_adb.mp4 import write_mp4
from simulators.fake_adb.shell_jobs import BACKGROUND, JobControl
from simulators.simdroid.faults import DeviceOffline

FRAME_INTERVAL_S = 0.1
MAX_TIME_LIMIT_S = 180
_FINISHING_SIGNALS = (signal.SIGINT, signal.SIGHUP)
_OPTIONS_WITH_VALUE = ("--time-limit", "--size", "--bit-rate", "--rotate-seconds", "--display-id")
_FLAGS = ("--verbose", "--bugreport", "--rotate")


def _parse(args: list[str]) -> tuple[dict[str, str], str] | ShellOutput:
    options: dict[str, str] = {}
    paths: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        name, has_value, value = arg.partition("=")
        if name in _OPTIONS_WITH_VALUE:
            if not has_value:
                if index + 1 >= len(args):
                    return _usage(f"screenrecord: option '{arg}' requires an argument\n")
                value, index = args[index + 1], index + 1
            options[name] = value
        elif arg in _FLAGS:
            options[arg] = ""
        elif arg in ("--help", "-h") or arg.startswith("-"):
            return _usage("" if arg in ("--help", "-h") else f"screenrecord: unrecognized option '{arg}'\n")
        else:
            paths.append(arg)
        index += 1
    if len(paths) != 1:
        return _usage("Must specify output file (see --help).\n")
    return options, paths[0]


def _usage(message: str) -> ShellOutput:
    usage = "Usage: screenrecord [options] <filename>\n\nRecords the device's display to a .mp4 file.\n"
    return ShellOutput(stderr=(message or usage).encode(), exit_code=2)


def record(device: FakeDevice, args: list[str], control: JobControl) -> ShellOutput:
    """Record until the time limit, a signal in ``control``, or the server stopping."""
    parsed = _parse(args)
    if isinstance(parsed, ShellOutput):
        return parsed
    options, path = parsed
    limit = options.get("--time-limit", str(MAX_TIME_LIMIT_S))
    if not limit.isdigit() or not 1 <= int(limit) <= MAX_TIME_LIMIT_S:
        return ShellOutput(
            stderr=f"Time limit {limit}s outside acceptable range [1,{MAX_TIME_LIMIT_S}]\n".encode(),
            exit_code=2,
        )
    size = options.get("--size")
    if size is not None and not re.fullmatch(r"[1-9]\d*x[1-9]\d*", size):
        return ShellOutput(stderr=f"Invalid size '{size}', must be width x height\n".encode(), exit_code=2)
    try:
        samples, elapsed_ms = _capture(device, control, int(limit))
    except DeviceOffline:
        return ShellOutput(stderr=b"screenrecord: the display went away\n", exit_code=1)
    if control.signal_number is not None and control.signal_number not in _FINISHING_SIGNALS:
        return ShellOutput(exit_code=128 + control.signal_number)  # killed: the file is never finished
    frames, width, height = _encode(samples, elapsed_ms, size)
    with device.lock:
        try:
            device.files.write(path, write_mp4(frames, width, height))
        except IsADirectoryError:
            return ShellOutput(stderr=f"Unable to open '{path}': Is a directory\n".encode(), exit_code=1)
    verbose = f"Recording finished: {len(frames)} frames in {elapsed_ms / 1000:.1f} seconds\n"
    return ShellOutput(stdout=verbose.encode() if "--verbose" in options else b"")


def _capture(device: FakeDevice, control: JobControl, limit_s: int) -> tuple[list[tuple[bytes, int]], int]:
    """The distinct screens (PNG, first shown at ms) until stopped, and the recording's length in ms."""
    samples: list[tuple[bytes, int]] = []
    start = time.monotonic()
    while True:
        with device.lock:
            device.phone.check_online()
            png = device.phone.screenshot_png()
        elapsed_ms = int((time.monotonic() - start) * 1000)
        if not samples or samples[-1][0] != png:
            samples.append((png, elapsed_ms))
        if (
            control.stop.wait(FRAME_INTERVAL_S)
            or device.stopping.is_set()
            or time.monotonic() - start >= limit_s
        ):
            return samples, max(int((time.monotonic() - start) * 1000), samples[-1][1] + 1)


def _encode(
    samples: list[tuple[bytes, int]], elapsed_ms: int, size: str | None
) -> tuple[list[tuple[bytes, int]], int, int]:
    frames: list[tuple[bytes, int]] = []
    width = height = 0
    for index, (png, shown_ms) in enumerate(samples):
        image = Image.open(io.BytesIO(png)).convert("RGB")
        if size is not None:
            image = image.resize(tuple(int(side) for side in size.split("x")))  # type: ignore[arg-type]
        width, height = image.size
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=90)
        until_ms = samples[index + 1][1] if index + 1 < len(samples) else elapsed_ms
        frames.append((buffer.getvalue(), until_ms - shown_ms))
    return frames, width, height


def screenrecord(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    """In the foreground nothing can signal it, so it records until its time limit."""
    return record(device, args, JobControl(threading.Event()))


COMMANDS = {"screenrecord": screenrecord}
BACKGROUND["screenrecord"] = record
