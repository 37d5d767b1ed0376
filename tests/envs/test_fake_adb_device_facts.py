"""What adbutils' helpers parse out of a device, served by the fake server: ``app_info`` and
``package_info`` (``dumpsys package``), ``wlan_ip`` (``ifconfig``/``ip addr``), ``framebuffer()``
(the ``framebuffer:`` service), ``which`` and the ``log`` command. The checks follow the assertions
of adbutils' own e2e suite (its tests are not copied; see docs/operations.md)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import adbutils
import pytest

from simulators.fake_adb import FakeAdbServer

SERIAL = "emulator-5554"


@pytest.fixture
def device(fake_adb: FakeAdbServer) -> adbutils.AdbDevice:
    return adbutils.AdbClient("127.0.0.1", fake_adb.port).device(SERIAL)


def test_app_info_and_package_info_of_the_current_app(device: adbutils.AdbDevice) -> None:
    device.app_start("com.android.settings")
    package = device.app_current().package
    info = device.app_info(package)
    assert info is not None and info.package_name == package
    assert info.version_name == "14" and info.version_code == 34
    assert "SYSTEM" in info.flags and info.signature and info.first_install_time is not None
    assert info.path == f"/data/app/{package}/base.apk"
    legacy = device.package_info(package)
    assert legacy is not None and legacy["version_name"] == "14"
    assert device.app_info("no.such.app") is None
    assert "Unable to find package: no.such.app" in device.shell("dumpsys package no.such.app")


def test_wlan_ip_follows_the_wifi_switch(device: adbutils.AdbDevice) -> None:
    device.switch_airplane(False)
    device.switch_wifi(True)
    assert device.wlan_ip() == "10.0.2.16"
    assert "inet 10.0.2.16/24" in device.shell("ip addr show dev wlan0")
    device.switch_wifi(False)
    assert "inet addr" not in device.shell("ifconfig wlan0")
    with pytest.raises(adbutils.AdbError, match="fail to parse wlan ip"):
        device.wlan_ip()
    device.switch_wifi(True)
    assert (
        device.shell2("ifconfig eth0").returncode == 1
    )  # an emulator's Wi-Fi is wlan0, as adbutils tries first


def test_framebuffer_is_the_screen(device: adbutils.AdbDevice, fake_adb: FakeAdbServer) -> None:
    image = device.framebuffer()
    assert image.size == fake_adb.device(SERIAL).phone.size
    assert image.convert("RGB").tobytes() == device.screenshot().convert("RGB").tobytes()


def test_which_finds_the_device_commands(device: adbutils.AdbDevice) -> None:
    found = device.shell2(["which", "screencap"])
    assert (found.returncode, found.output.strip()) == (0, "/system/bin/screencap")
    assert device.shell2(["which", "no-such-tool"]).returncode == 1


def test_log_writes_the_device_log(device: adbutils.AdbDevice) -> None:
    device.shell(["log", "-p", "w", "-t", "TAG", "hello world"])
    device.shell(["log", "plain"])
    assert any(
        line.endswith("W/TAG(1000): hello world".replace("(1000)", "( 1000)"))
        for line in device.shell("logcat -d -v time").splitlines()
    )
    assert "I/log: plain" in device.shell("logcat -d -v tag")
    assert device.shell2(["log", "-p", "q", "x"]).returncode == 1


def _wait_for(predicate: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_logcat_follows_new_lines_until_stopped(device: adbutils.AdbDevice, tmp_path: Path) -> None:
    path = tmp_path / "logcat.txt"
    device.shell(["log", "-t", "OLD", "cleared before the stream"])
    stream = device.logcat(path, clear=True, command="logcat -v time", re_filter="I/TAG")
    device.shell(["log", "-p", "i", "-t", "TAG", "hello"])
    device.shell(["log", "-p", "i", "-t", "OTHER", "filtered out"])
    assert _wait_for(lambda: "hello" in path.read_text(encoding="utf-8"))
    device.shell(["log", "-p", "i", "-t", "TAG", "second"])
    assert _wait_for(lambda: "second" in path.read_text(encoding="utf-8"))
    stream.stop(timeout=10)
    text = path.read_text(encoding="utf-8")
    assert re.search(r"I/TAG\(\s*\d+\): hello", text) and "OLD" not in text and "OTHER" not in text


def test_following_logcat_over_shell_v2_and_its_end_on_hang_up(device: adbutils.AdbDevice) -> None:
    device.shell(["log", "-t", "TAG", "kept"])
    connection = device.shell("logcat -v tag", stream=True)
    connection.conn.settimeout(10)
    assert b"I/TAG: kept" in connection.conn.recv(4096)
    connection.close()
    # The server let go of the stream: the device still answers, and a dump still works.
    assert "I/TAG: kept" in device.shell("logcat -d -v tag")
    assert "I/TAG: kept" in device.shell("logcat -v tag | grep kept")  # in a pipeline: dumps and returns
