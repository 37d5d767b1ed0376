"""adbutils' screen recorder against the fake server: ``which screenrecord``, a pushed script that runs
``screenrecord "$1" &``, keeps ``PID=$!``, waits on ``read`` for the client's newline and stops the job
with ``kill -INT $PID; wait``; then the MP4 is pulled. Also the shell features that script needs."""

from __future__ import annotations

import io
import time
from pathlib import Path

import adbutils
import numpy as np
import pytest
from PIL import Image

from simulators.fake_adb import FakeAdbServer
from simulators.fake_adb.mp4 import read_mp4_frames

SERIAL = "emulator-5554"


@pytest.fixture
def device(fake_adb: FakeAdbServer) -> adbutils.AdbDevice:
    return adbutils.AdbClient("127.0.0.1", fake_adb.port).device(SERIAL)


def _pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), dtype=np.int16)


def _close(jpeg: bytes, png: bytes) -> bool:
    """Whether a recorded (lossy JPEG) frame shows the same screen as a screenshot."""
    frame, screen = _pixels(jpeg), _pixels(png)
    return frame.shape == screen.shape and float(np.abs(frame - screen).mean()) < 4.0


def test_start_and_stop_recording_pulls_an_mp4_of_the_screen(
    device: adbutils.AdbDevice, fake_adb: FakeAdbServer, tmp_path: Path
) -> None:
    device.app_start("com.android.settings")
    before = device.shell("screencap -p", encoding=None)
    output = tmp_path / "video.mp4"
    device.start_recording(str(output))
    assert device.is_recording()
    time.sleep(0.5)
    device.app_start("com.google.android.apps.maps")
    after = device.shell("screencap -p", encoding=None)
    time.sleep(0.5)
    device.stop_recording()
    codec, frames = read_mp4_frames(output.read_bytes())
    assert codec == b"jpeg"
    assert _close(frames[0][0], before) and _close(frames[-1][0], after)
    assert sum(duration for _, duration in frames) >= 1000
    # The recorder removes its file on the device once pulled.
    assert not [path for path in fake_adb.device(SERIAL).files.files if path.endswith(".mp4")]


def test_screenrecord_in_the_foreground_stops_at_its_time_limit(device: adbutils.AdbDevice) -> None:
    result = device.shell2("screenrecord --verbose --time-limit 1 --size 90x160 /sdcard/clip.mp4")
    assert result.returncode == 0 and "Recording finished" in result.output
    codec, frames = read_mp4_frames(device.sync.read_bytes("/sdcard/clip.mp4"))
    assert codec == b"jpeg" and _pixels(frames[0][0]).shape == (160, 90, 3)
    assert device.shell2("screenrecord").returncode == 2
    assert "outside acceptable range" in device.shell2("screenrecord --time-limit 999 /sdcard/x.mp4").output


def test_a_background_job_killed_without_sigint_writes_no_file(device: adbutils.AdbDevice) -> None:
    script = "screenrecord /sdcard/killed.mp4 &\nkill -9 $!\nwait $!\necho status=$?"
    result = device.shell2(["sh", "-c", script])
    assert result.output.strip() == "status=137"
    assert device.shell2("ls /sdcard/killed.mp4").returncode != 0


def test_scripts_get_arguments_variables_comments_and_read(device: adbutils.AdbDevice) -> None:
    script = b'#!/system/bin/sh\n# a comment\nNAME=$1\nread FIRST REST\necho "$NAME:${FIRST}:$REST:$#"\n'
    device.sync.push(script, "/sdcard/args.sh")
    stream = device.shell(["sh", "/sdcard/args.sh", "hello", "two"], stream=True)
    stream.send(b"typed words here\n")
    assert stream.read_until_close().strip() == "hello:typed:words here:2"
    # mksh runs a pipeline's last command in the shell itself, so `read` there sets the variable.
    assert device.shell2("echo x y | read A && echo $A").output.strip() == "x y"
    assert device.shell2(["which", "kill", "sh"]).returncode == 0
    assert device.shell2(["which", "read"]).returncode == 1  # a shell builtin, not a binary
    assert device.shell2("kill -INT 999").returncode == 1
