"""Debian's ``adb`` client (1.0.41) against the fake server: the commands a person tries by hand.

Port forwards that carry traffic (the client switches to the device, then sends ``host:forward:``),
``adb logcat`` (``export ...; exec logcat``), stdin to ``adb shell`` commands (shell v2 stdin
packets), interactive shells with and without a terminal, ``md5sum`` and ``adb emu`` on the
serial's console port. Each test skips with the reason when ``adb`` is not installed.
"""

from __future__ import annotations

import hashlib
import os
import pty
import re
import select
import socket
import socketserver
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from simulators.fake_adb import FakeAdbServer
from simulators.fake_adb.server import ConsolePortError
from tests.envs.test_fake_adb_cli import ADB, SERIAL, adb, cli_server, needs_adb, no_adb_daemon_running

pytestmark = needs_adb
__all__ = ["cli_server"]  # the fixture, shared with test_fake_adb_cli


def exchange(port: int, payload: bytes) -> bytes:
    """Send ``payload`` to 127.0.0.1:``port``, end the input, and read until the other side closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received


def test_forward_carries_traffic_to_the_device_echo_port(cli_server: FakeAdbServer) -> None:
    result = adb(cli_server, "-s", SERIAL, "forward", "tcp:0", "tcp:7")
    assert result.returncode == 0, result.stderr
    port = int(result.stdout.decode().strip())  # adb prints the port the server picked for tcp:0
    payload = os.urandom(200_000)  # more than one socket buffer, both ways
    assert exchange(port, payload) == payload
    listing = adb(cli_server, "forward", "--list").stdout.decode()
    assert listing.splitlines()[0] == f"{SERIAL} tcp:{port} tcp:7"
    assert adb(cli_server, "-s", SERIAL, "forward", "--remove", f"tcp:{port}").returncode == 0
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    assert no_adb_daemon_running()


@pytest.fixture
def upper_case_service() -> Iterator[int]:
    """A TCP service on the host that answers each connection with its input in upper case."""

    class Upper(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            data = b""
            while chunk := self.request.recv(65536):
                data += chunk
            self.request.sendall(data.upper())

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Upper)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_forward_reaches_a_service_put_on_the_device_with_reverse(
    cli_server: FakeAdbServer, upper_case_service: int
) -> None:
    # The fake device runs no programs: a reverse puts a host service on one of its ports.
    assert adb(cli_server, "-s", SERIAL, "reverse", "tcp:8000", f"tcp:{upper_case_service}").returncode == 0
    result = adb(cli_server, "-s", SERIAL, "forward", "tcp:0", "tcp:8000")
    assert result.returncode == 0, result.stderr
    assert exchange(int(result.stdout), b"through the device\n") == b"THROUGH THE DEVICE\n"
    closed = adb(cli_server, "-s", SERIAL, "forward", "tcp:0", "tcp:8001")  # nothing listens there
    with socket.create_connection(("127.0.0.1", int(closed.stdout)), timeout=10) as sock:
        assert sock.recv(100) == b""  # accepted on the host, then closed


def test_logcat_dump_and_follow(cli_server: FakeAdbServer) -> None:
    assert (
        adb(
            cli_server, "-s", SERIAL, "shell", "am", "start", "-n", "com.android.settings/.Settings"
        ).returncode
        == 0
    )
    dump = adb(cli_server, "-s", SERIAL, "logcat", "-d")
    assert dump.returncode == 0, dump.stderr
    assert b"com.android.settings" in dump.stdout
    assert ADB is not None
    env = {**os.environ, "ANDROID_ADB_SERVER_PORT": str(cli_server.port)}
    follow = subprocess.Popen(
        [ADB, "-P", str(cli_server.port), "-s", SERIAL, "logcat", "-s", "Marker"],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    try:
        assert (
            adb(cli_server, "-s", SERIAL, "shell", "log", "-t", "Marker", "logged while following").returncode
            == 0
        )
        assert follow.stdout is not None
        line = b""
        while b"logged while following" not in line:
            line = follow.stdout.readline()
            assert line, "the following logcat ended"
    finally:
        follow.kill()
        follow.wait()


def test_stdin_reaches_shell_commands(cli_server: FakeAdbServer) -> None:
    piped = adb(cli_server, "-s", SERIAL, "shell", "cat", stdin=b"x\n")
    assert (piped.returncode, piped.stdout) == (0, b"x\n")
    data = os.urandom(100_000)
    digest = adb(cli_server, "-s", SERIAL, "shell", "md5sum", stdin=data)
    assert digest.stdout.decode() == f"{hashlib.md5(data).hexdigest()}  -\n"
    grep = adb(cli_server, "-s", SERIAL, "shell", "grep", "b", stdin=b"a\nb\nabc\n")
    assert grep.stdout == b"b\nabc\n"
    script = adb(cli_server, "-s", SERIAL, "shell", "sh", stdin=b"X=7\necho $X\nexit 5\n")
    assert (script.returncode, script.stdout) == (5, b"7\n")
    # A command that reads no stdin does not wait for it.
    assert adb(cli_server, "-s", SERIAL, "shell", "echo", "no input").stdout == b"no input\n"


def test_md5sum_of_a_pushed_file(cli_server: FakeAdbServer, tmp_path: Path) -> None:
    local = tmp_path / "blob.bin"
    local.write_bytes(os.urandom(5000))
    assert adb(cli_server, "-s", SERIAL, "push", str(local), "/sdcard/blob.bin").returncode == 0
    result = adb(cli_server, "-s", SERIAL, "shell", "md5sum", "/sdcard/blob.bin", "/sdcard/nope")
    expected = hashlib.md5(local.read_bytes()).hexdigest()
    assert result.stdout.decode() == f"{expected}  /sdcard/blob.bin\n"
    assert result.returncode == 1 and b"md5sum: /sdcard/nope: No such file or directory" in result.stderr


def test_export_and_exec_in_the_shell(cli_server: FakeAdbServer) -> None:
    result = adb(
        cli_server, "-s", SERIAL, "shell", "export GREETING=hi; echo $GREETING; exec echo done; echo never"
    )
    assert (result.returncode, result.stdout) == (0, b"hi\ndone\n")


def test_interactive_shell_from_a_pipe_runs_line_by_line(cli_server: FakeAdbServer) -> None:
    lines = b"X=5\necho $X\nfalse\necho status $?\nexit 3\necho never\n"
    result = adb(cli_server, "-s", SERIAL, "shell", stdin=lines)
    assert (result.returncode, result.stdout) == (3, b"5\nstatus 1\n")  # no prompt without a terminal
    ended = adb(cli_server, "-s", SERIAL, "shell", stdin=b"cat /nope\n")  # end of input: last status
    assert ended.returncode == 1 and b"No such file" in ended.stderr


def read_until(fd: int, wanted: bytes, timeout_s: float = 15.0) -> bytes:
    """Read a pseudo-terminal until ``wanted`` appears (a test timeout, not a measurement)."""
    seen = b""
    deadline = time.monotonic() + timeout_s
    while wanted not in seen:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no {wanted!r} in {seen!r}"
        readable, _, _ = select.select([fd], [], [], remaining)
        if readable:
            try:
                seen += os.read(fd, 4096)
            except OSError:  # the client exited and closed the terminal
                break
    return seen


def test_interactive_shell_on_a_terminal_prompts_and_echoes(cli_server: FakeAdbServer) -> None:
    assert ADB is not None
    controller, terminal = pty.openpty()
    env = {**os.environ, "ANDROID_ADB_SERVER_PORT": str(cli_server.port), "TERM": "xterm"}
    process = subprocess.Popen(
        [ADB, "-P", str(cli_server.port), "-s", SERIAL, "shell"],
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        env=env,
    )
    os.close(terminal)
    try:
        assert b"emu64xa:/ $ " in read_until(controller, b"$ ")
        os.write(controller, b"echo hello\r")
        answer = read_until(controller, b"$ ")
        assert b"echo hello\r\n" in answer and b"hello\r\n" in answer.split(b"echo hello\r\n", 1)[1]
        os.write(controller, b"exit 4\r")
        assert process.wait(timeout=15) == 4
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(controller)


@pytest.fixture
def emulator_pair(start_fake_adb: Callable[..., FakeAdbServer], tmp_path: Path) -> tuple[FakeAdbServer, Path]:
    """A one-device server whose console sits on its serial's port, and a home holding its token."""
    home = tmp_path / "home"
    home.mkdir()
    token = home / ".emulator_console_auth_token"
    token.write_text("fake-console-token")
    assert ADB is not None
    banner = subprocess.run([ADB, "version"], capture_output=True, text=True, timeout=10, check=True).stdout
    match = re.search(r"version 1\.0\.(\d+)", banner)
    assert match, banner
    for _ in range(20):  # a free even port: the console's, as an emulator's
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = probe.getsockname()[1] & ~1
        try:
            server = start_fake_adb(
                devices=1,
                console_base_port=base,
                console_auth_token_path=token,
                server_version=int(match.group(1)),
            )
        except ConsolePortError:
            continue
        return server, home
    pytest.skip("found no free console port")


def test_adb_emu_finds_the_console_of_the_serial(emulator_pair: tuple[FakeAdbServer, Path]) -> None:
    server, home = emulator_pair
    serial = server.devices[0].serial
    name = adb(server, "-s", serial, "emu", "avd", "name", home=home)
    assert (name.returncode, name.stdout.decode().split()) == (0, [serial, "OK"])
    # Without -s the client asks the server for the one emulator (host:devices).
    assert adb(server, "emu", "avd", "snapshot", "save", "before", home=home).returncode == 0
    assert "before" in server.devices[0].snapshots
    (home / ".emulator_console_auth_token").write_text("wrong-token")
    refused = adb(server, "-s", serial, "emu", "avd", "name", home=home)
    assert b"KO: authentication token does not match" in refused.stdout
    (home / ".emulator_console_auth_token").write_text("fake-console-token")
    assert adb(server, "-s", serial, "emu", "kill", home=home).returncode == 0
    assert serial not in adb(server, "devices").stdout.decode()
