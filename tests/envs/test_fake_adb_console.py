"""The fake emulator console (auth, snapshots, kill) and the EmulatorConsole client against it."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from simulators.adb import ConsoleError, EmulatorConsole
from simulators.adb.console import console_port_for_serial
from simulators.fake_adb import FakeAdbServer
from simulators.simdroid import get_task

SERIAL = "emulator-5554"


def raw_session(port: int) -> tuple[socket.socket, object]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    return sock, sock.makefile("rb")


def read_until_status(reader) -> list[str]:
    lines = []
    while True:
        line = reader.readline().decode().rstrip("\r\n")
        lines.append(line)
        if line == "OK" or line.startswith(("OK:", "KO:")):
            return lines


def test_console_requires_auth_with_the_token_file(fake_adb: FakeAdbServer, console_token: Path) -> None:
    sock, reader = raw_session(fake_adb.console_port(SERIAL))
    banner = read_until_status(reader)
    assert banner[0] == "Android Console: Authentication required" and str(console_token) in banner[3]
    sock.sendall(b"avd snapshot list\r\n")
    assert read_until_status(reader)[-1].startswith("KO: authentication required")
    sock.sendall(b"auth wrong-token\r\n")
    assert read_until_status(reader)[-1].startswith("KO: authentication token does not match")
    sock.sendall(b"auth test-token-123\r\n")
    assert read_until_status(reader)[-1] == "OK"
    sock.sendall(b"ping\r\n")
    assert read_until_status(reader) == ["I am alive!", "OK"]
    reader.close()
    sock.close()


def test_client_with_a_wrong_token_gets_a_console_error(fake_adb: FakeAdbServer, tmp_path: Path) -> None:
    bad = tmp_path / "bad_token"
    bad.write_text("nope")
    with pytest.raises(ConsoleError, match="refused 'auth <token>'"):
        EmulatorConsole("127.0.0.1", fake_adb.console_port(SERIAL), bad).connect()
    with pytest.raises(ConsoleError, match="cannot be read"):
        EmulatorConsole("127.0.0.1", fake_adb.console_port(SERIAL), tmp_path / "missing").connect()


def test_snapshot_save_and_load_restore_device_state_and_files(
    fake_adb: FakeAdbServer, console_token: Path
) -> None:
    device = fake_adb.device(SERIAL)
    task = get_task("general-train-0001")
    with device.lock:
        device.phone.load_task(task)
        device.files.write("/sdcard/note.txt", b"before")
        start_state = device.phone.snapshot()
    with EmulatorConsole("127.0.0.1", fake_adb.console_port(SERIAL), console_token) as console:
        console.snapshot_save("start")
        with device.lock:
            device.phone.settings_put("global", "wifi_on", "0")
            device.phone.start_app("com.android.settings")
            device.files.write("/sdcard/note.txt", b"after")
        assert device.phone.snapshot() != start_state
        console.snapshot_load("start")
        assert device.phone.snapshot() == start_state
        assert device.files.read("/sdcard/note.txt") == b"before"
        assert console.snapshot_list() == ["start"]
        with pytest.raises(ConsoleError, match="snapshot 'other' does not exist"):
            console.snapshot_load("other")


def test_consoles_are_per_device(fake_adb: FakeAdbServer, console_token: Path) -> None:
    ports = {fake_adb.console_port(serial) for serial in ("emulator-5554", "emulator-5556")}
    assert len(ports) == 2
    with EmulatorConsole("127.0.0.1", fake_adb.console_port("emulator-5556"), console_token) as console:
        assert console.command("avd name") == ["emulator-5556"]


def test_kill_removes_the_device_from_adb(fake_adb: FakeAdbServer, console_token: Path) -> None:
    import adbutils

    client = adbutils.AdbClient("127.0.0.1", fake_adb.port)
    with EmulatorConsole("127.0.0.1", fake_adb.console_port(SERIAL), console_token) as console:
        console.kill()
    assert [info.serial for info in client.list()] == ["emulator-5556"]


def test_console_base_port_names_the_serials_like_an_emulator(
    start_fake_adb: Callable[..., FakeAdbServer],
) -> None:
    with socket.socket() as probe:  # find two free ports two apart, as emulators use
        probe.bind(("127.0.0.1", 0))
        base = probe.getsockname()[1]
    if base > 65000:
        base -= 1000
    try:
        server = start_fake_adb(devices=2, console_base_port=base)
    except OSError:
        pytest.skip(f"ports {base}/{base + 2} are taken on this machine")
    serials = [device.serial for device in server.devices]
    assert serials == [f"emulator-{base}", f"emulator-{base + 2}"]
    assert [server.console_port(serial) for serial in serials] == [base, base + 2]
    assert [console_port_for_serial(serial) for serial in serials] == [base, base + 2]


def test_missing_token_file_is_created_with_a_random_token(
    start_fake_adb: Callable[..., FakeAdbServer], tmp_path: Path
) -> None:
    token_path = tmp_path / "fresh" / "token"
    server = start_fake_adb(devices=1, console_auth_token_path=token_path)
    token = token_path.read_text()
    assert len(token) >= 12 and token_path.stat().st_mode & 0o077 == 0
    with EmulatorConsole("127.0.0.1", server.console_port(SERIAL), token_path) as console:
        assert console.command("ping") == ["I am alive!"]


def test_track_devices_and_wait_for_follow_device_state(fake_adb: FakeAdbServer, console_token: Path) -> None:
    import adbutils

    client = adbutils.AdbClient("127.0.0.1", fake_adb.port)
    client.wait_for(SERIAL, state="device", timeout=5)  # already online: returns at once
    events = client.track_devices()
    first = {next(events), next(events)}
    assert {(event.serial, event.status, event.present) for event in first} == {
        ("emulator-5554", "device", True),
        ("emulator-5556", "device", True),
    }
    with EmulatorConsole("127.0.0.1", fake_adb.console_port("emulator-5556"), console_token) as console:
        console.kill()
    gone = next(events)
    assert (gone.serial, gone.present, gone.status) == ("emulator-5556", False, "absent")
    events.close()
