"""What a user debugging a device reaches for, through adbutils against the fake server.

Packages, logcat, port forwards/reverses and a few file commands: each is either served (minimally)
or refused with the text real adb uses, never with the fake's own "not supported" message.
"""

from __future__ import annotations

import socket

import adbutils
import pytest

from simulators.fake_adb import FakeAdbServer

SERIAL = "emulator-5554"


@pytest.fixture
def client(fake_adb: FakeAdbServer) -> adbutils.AdbClient:
    return adbutils.AdbClient("127.0.0.1", fake_adb.port)


@pytest.fixture
def device(client: adbutils.AdbClient) -> adbutils.AdbDevice:
    return client.device(SERIAL)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_pm_list_packages(device: adbutils.AdbDevice) -> None:
    packages = device.list_packages()
    assert "com.android.settings" in packages and "com.android.chrome" in packages
    assert device.shell("pm list packages settings").strip() == "package:com.android.settings"
    assert "package:" not in device.shell("pm list packages no.such.thing")


def test_pm_unknown_subcommand_is_refused_like_pm(device: adbutils.AdbDevice) -> None:
    result = device.shell2("pm frobnicate")
    assert result.returncode != 0 and "Unknown command: frobnicate" in result.output


def test_logcat_dump_and_clear(device: adbutils.AdbDevice) -> None:
    device.shell("am start -n com.android.settings/.Settings")
    dump = device.shell("logcat -d")
    assert "com.android.settings" in dump
    assert device.shell2("logcat -c").returncode == 0
    assert "com.android.settings" not in device.shell("logcat -d -v time")


def test_forward_list_and_remove(client: adbutils.AdbClient, device: adbutils.AdbDevice) -> None:
    local = f"tcp:{_free_port()}"
    device.forward(local, "tcp:8080")
    assert [(f.serial, f.local, f.remote) for f in device.forward_list()] == [(SERIAL, local, "tcp:8080")]
    assert [f.local for f in client.forward_list()] == [local]
    assert [f.local for f in client.forward_list(SERIAL)] == [local]
    with pytest.raises(adbutils.AdbError, match="cannot rebind existing socket"):
        device.forward(local, "tcp:9090", norebind=True)
    device.forward_remove(local)
    assert device.forward_list() == []
    with pytest.raises(adbutils.AdbError, match=f"listener '{local}' not found"):
        device.forward_remove(local)
    device.forward(local, "tcp:8080")
    device.forward_remove_all()
    assert client.forward_list() == []


def test_forward_port_reuses_an_existing_forward(device: adbutils.AdbDevice) -> None:
    port = device.forward_port(7912)
    assert device.forward_port(7912) == port


def test_reverse_list_and_remove(device: adbutils.AdbDevice) -> None:
    device.reverse("tcp:1234", "tcp:5678")
    assert [(r.remote, r.local) for r in device.reverse_list()] == [("tcp:1234", "tcp:5678")]
    device.reverse_remove("tcp:1234")
    assert device.reverse_list() == []
    with pytest.raises(adbutils.AdbError, match="listener 'tcp:1234' not found"):
        device.reverse_remove("tcp:1234")
    device.reverse("tcp:1", "tcp:2")
    device.reverse_remove_all()
    assert device.reverse_list() == []


def test_pwd_mkdir_touch_ls(device: adbutils.AdbDevice) -> None:
    assert device.shell("pwd").strip() == "/"
    assert device.shell2("mkdir /sdcard/dbg").returncode == 0
    assert "dbg" in device.shell("ls /sdcard").split()
    assert device.shell("ls /sdcard/dbg") == ""  # an empty directory exists
    assert device.shell2("touch /sdcard/dbg/a.txt").returncode == 0
    assert device.shell("ls /sdcard/dbg").split() == ["a.txt"]
    again = device.shell2("mkdir /sdcard/dbg")
    assert again.returncode == 1 and "mkdir: '/sdcard/dbg': File exists" in again.output
    assert device.shell2("mkdir -p /sdcard/dbg/x/y").returncode == 0
    assert device.shell("ls /sdcard/dbg").split() == ["a.txt", "x"]
    assert device.sync.stat("/sdcard/dbg/x/y").mode != 0
