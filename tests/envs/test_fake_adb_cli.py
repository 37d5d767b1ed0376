"""Debian's ``adb`` command-line client against the fake server (``apt-get install -y adb``).

Every call passes ``-P <port>`` so the client talks to the fake server; the fake answers
``host:version`` with the client's own version so the client never kills it to start its own daemon.
Also exercises adbutils' high-level helpers that real projects use.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import adbutils
import pytest
from PIL import Image

from simulators.fake_adb import FakeAdbServer
from simulators.simdroid.catalog import SETTINGS

ADB = shutil.which("adb")
needs_adb = pytest.mark.skipif(
    ADB is None, reason="Debian's adb client is not installed (apt-get install -y adb)"
)
SERIAL = "emulator-5554"


def adb(
    server: FakeAdbServer,
    *args: str,
    cwd: Path | None = None,
    stdin: bytes | None = None,
    home: Path | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run Debian's adb against ``server``; ``stdin``: what it reads (none: /dev/null); ``home``: its
    HOME (where ``adb emu`` reads the console token)."""
    assert ADB is not None
    env = {**os.environ, "ANDROID_ADB_SERVER_PORT": str(server.port)}
    env.pop("ANDROID_SERIAL", None)
    if home is not None:
        env["HOME"] = str(home)
    return subprocess.run(
        [ADB, "-P", str(server.port), *args],
        capture_output=True,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        timeout=30,
        env=env,
        cwd=cwd,
        check=False,
    )


@pytest.fixture
def cli_server(start_fake_adb: Callable[..., FakeAdbServer]) -> FakeAdbServer:
    """A fake server that reports the installed client's version: a client that sees another version
    kills the server and starts its own daemon."""
    assert ADB is not None
    banner = subprocess.run([ADB, "version"], capture_output=True, text=True, timeout=10, check=True).stdout
    match = re.search(r"version 1\.0\.(\d+)", banner)
    assert match, banner
    return start_fake_adb(devices=2, server_version=int(match.group(1)))


def no_adb_daemon_running() -> bool:
    # `adb start-server` forks a daemon named "adb ... fork-server server"; none may be left behind.
    result = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True)
    return not any("fork-server" in line and "adb" in line for line in result.stdout.splitlines())


@needs_adb
def test_adb_devices_lists_the_serials(cli_server: FakeAdbServer) -> None:
    result = adb(cli_server, "devices")
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().splitlines()[1:3] == ["emulator-5554\tdevice", "emulator-5556\tdevice"]
    assert no_adb_daemon_running()


@needs_adb
def test_adb_shell_input_tap_changes_device_state(cli_server: FakeAdbServer) -> None:
    phone = cli_server.device(SERIAL).phone
    settings_icon = next(element for element in phone.elements() if element.label == "Settings")
    x, y = settings_icon.center
    result = adb(cli_server, "-s", SERIAL, "shell", "input", "tap", str(x), str(y))
    assert result.returncode == 0, result.stderr
    assert phone.current_activity().startswith(SETTINGS)
    failing = adb(cli_server, "-s", SERIAL, "shell", "cat /nope")
    assert failing.returncode == 1 and b"No such file" in failing.stderr


@needs_adb
def test_adb_exec_out_screencap_decodes_as_png(cli_server: FakeAdbServer) -> None:
    result = adb(cli_server, "-s", SERIAL, "exec-out", "screencap", "-p")
    assert result.returncode == 0, result.stderr
    image = Image.open(io.BytesIO(result.stdout))
    image.load()
    size = adb(cli_server, "-s", SERIAL, "shell", "wm", "size").stdout.decode().split()[-1]
    assert image.format == "PNG" and image.size == tuple(int(v) for v in size.split("x")) == (1080, 2400)


@needs_adb
def test_adb_pull_after_uiautomator_dump_and_push(cli_server: FakeAdbServer, tmp_path: Path) -> None:
    assert adb(cli_server, "-s", SERIAL, "shell", "uiautomator", "dump").stdout.startswith(
        b"UI hierchary dumped to"
    )
    pulled = tmp_path / "dump.xml"
    result = adb(cli_server, "-s", SERIAL, "pull", "/sdcard/window_dump.xml", str(pulled))
    assert result.returncode == 0, result.stderr
    assert pulled.read_text() == cli_server.device(SERIAL).phone.ui_xml()
    local = tmp_path / "up.txt"
    local.write_text("pushed")
    assert adb(cli_server, "-s", SERIAL, "push", str(local), "/sdcard/up.txt").returncode == 0
    assert cli_server.device(SERIAL).files.read("/sdcard/up.txt") == b"pushed"
    assert no_adb_daemon_running()


def test_adbutils_helpers_work_against_the_fake(fake_adb: FakeAdbServer) -> None:
    device = adbutils.AdbClient("127.0.0.1", fake_adb.port).device(SERIAL)
    # Tapping at screenshot pixels must hit the same spot on the screen: one size for both.
    assert device.window_size() == (1080, 2400)
    assert device.screenshot().size == (1080, 2400)
    device.app_start(SETTINGS)  # monkey -p ...
    current = device.app_current()
    assert current.package == SETTINGS
    device.shell(["input", "text", "x"])
    assert device.prop.get("ro.build.version.sdk") == "34"
    assert device.shell2("cat /nope").returncode == 1  # shell v1: exit code via "; echo X4EXIT:$?"
    assert device.shell2("exit 7", v2=True).returncode == 7


def test_run_fake_adb_serves_until_interrupted(tmp_path: Path) -> None:
    """The blocking entry point behind ``distrl fake-adb``: prints where it listens, stops on Ctrl-C."""
    script = "from simulators.fake_adb import run_fake_adb; run_fake_adb(port=0, devices=2)"
    command = [sys.executable, "-c", script]
    env = {**os.environ, "HOME": str(tmp_path), "ADBUTILS_ADB_PATH": "/bin/false"}  # token file goes to tmp
    # A test run started in the background by a non-interactive shell inherits SIGINT as ignored, and
    # Python then installs no Ctrl-C handler: give the child the default disposition back.
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        match = re.search(
            r"listening on 127\.0\.0\.1:(\d+) \(emulator-5554 console (\d+), emulator-5556", banner
        )
        assert match, banner + (process.stderr.read() if process.poll() is not None else "")
        client = adbutils.AdbClient("127.0.0.1", int(match.group(1)))
        assert [info.serial for info in client.list()] == ["emulator-5554", "emulator-5556"]
        assert (tmp_path / ".emulator_console_auth_token").exists()
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_screen_scale_shrinks_the_whole_screen_consistently(
    start_fake_adb: Callable[..., FakeAdbServer],
) -> None:
    server = start_fake_adb(devices=1, screen_scale=0.25)
    device = adbutils.AdbClient("127.0.0.1", server.port).device(SERIAL)
    assert device.window_size() == (270, 600)
    assert device.screenshot().size == (270, 600)
    assert 'bounds="[0,0][270,600]"' in device.dump_hierarchy()
