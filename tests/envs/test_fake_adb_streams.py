"""Forwards that carry traffic, stdin and interactive shells on the wire, without Debian's adb (the
same behaviour through the real client: test_fake_adb_client_commands.py)."""

from __future__ import annotations

import hashlib
import socket
import struct
from collections.abc import Callable

import adbutils
import pytest

from simulators.fake_adb import FakeAdbServer
from tests.envs.test_fake_adb_protocol import RawAdb, open_device, shell_v2_packets

SERIAL = "emulator-5554"
STDIN, STDOUT, STDERR, EXIT, CLOSE_STDIN = 0, 1, 2, 3, 4


def packet(packet_id: int, data: bytes = b"") -> bytes:
    return struct.pack("<BI", packet_id, len(data)) + data


def echo_through(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received


def test_forward_on_a_transport_switched_socket_resolves_tcp_0_and_echoes(fake_adb: FakeAdbServer) -> None:
    client = RawAdb(fake_adb.port)
    client.send(f"host:tport:serial:{SERIAL}")  # what Debian's adb sends before host:forward
    assert client.status() == ("OKAY", None) and struct.unpack("<Q", client.read(8)) == (1,)
    client.send("host:forward:tcp:0;tcp:7")
    assert client.read(8) == b"OKAYOKAY"  # connected, done; then the port it picked
    port = int(client.block())
    client.close()
    assert echo_through(port, b"ping" * 1000) == b"ping" * 1000
    assert f"{SERIAL} tcp:{port} tcp:7" in fake_adb.table.forwards.listing()


def test_adbutils_forward_and_direct_connection_reach_the_device_echo(fake_adb: FakeAdbServer) -> None:
    device = adbutils.AdbClient("127.0.0.1", fake_adb.port).device(SERIAL)
    port = device.forward_port(7)
    assert echo_through(port, b"through a forward") == b"through a forward"
    with device.create_connection(adbutils.Network.TCP, 7) as sock:
        sock.sendall(b"direct")
        assert sock.recv(100) == b"direct"
    with pytest.raises(adbutils.AdbError, match="closed"):  # nothing listens on the device's port 9
        device.create_connection(adbutils.Network.TCP, 9)


def test_forward_failures_name_the_problem(fake_adb: FakeAdbServer) -> None:
    device = adbutils.AdbClient("127.0.0.1", fake_adb.port).device(SERIAL)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(adbutils.AdbError, match="cannot bind listener: Address already in use"):
            device.forward(f"tcp:{taken.getsockname()[1]}", "tcp:7")
    with pytest.raises(adbutils.AdbError, match="tcp:PORT only"):
        device.forward("localabstract:x", "tcp:7")


def test_stopping_the_server_closes_its_forward_listeners(
    start_fake_adb: Callable[..., FakeAdbServer],
) -> None:
    server = start_fake_adb(devices=1)
    port = adbutils.AdbClient("127.0.0.1", server.port).device(SERIAL).forward_port(7)
    server.stop()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_shell_v2_stdin_packets_reach_cat_and_md5sum(fake_adb: FakeAdbServer) -> None:
    typed = b"typed\nlines\n"
    for command, expected in (("cat", typed), ("md5sum", f"{hashlib.md5(typed).hexdigest()}  -\n".encode())):
        client = open_device(fake_adb.port, SERIAL)
        client.send(f"shell,v2,raw:{command}")
        assert client.status() == ("OKAY", None)
        client.sock.sendall(packet(STDIN, b"typed\n") + packet(STDIN, b"lines\n") + packet(CLOSE_STDIN))
        assert shell_v2_packets(client) == [(STDOUT, expected), (EXIT, b"\x00")]
        client.close()


def test_interactive_v2_shell_without_a_pty_runs_each_line_as_it_comes(fake_adb: FakeAdbServer) -> None:
    client = open_device(fake_adb.port, SERIAL)
    client.send("shell,v2,TERM=xterm,raw:")
    assert client.status() == ("OKAY", None)
    client.sock.sendall(packet(STDIN, b"N=4\necho $N\n"))
    assert struct.unpack("<BI", client.read(5)) == (STDOUT, 2) and client.read(2) == b"4\n"  # before exit
    client.sock.sendall(packet(STDIN, b"cat /nope; exit 9\necho never\n"))
    assert shell_v2_packets(client) == [
        (STDERR, b"cat: /nope: No such file or directory\n"),
        (EXIT, b"\x09"),
    ]
    client.close()


def test_interactive_v1_shell_has_a_prompt_echo_and_crlf(fake_adb: FakeAdbServer) -> None:
    client = open_device(fake_adb.port, SERIAL)
    client.send("shell:")
    assert client.status() == ("OKAY", None)
    assert client.read(12) == b"emu64xa:/ $ "
    client.sock.sendall(b"echo hx\x7fi\r")  # a typo erased with Backspace
    expected = b"echo hx\b \bi\r\nhi\r\nemu64xa:/ $ "
    assert client.read(len(expected)) == expected
    client.sock.sendall(b"exit\r")
    assert client.read_all() == b"exit\r\n"  # the echo; then the shell ends and the stream with it
    client.close()


def test_export_exec_and_logcat_as_debian_adb_sends_it(fake_adb: FakeAdbServer) -> None:
    device = adbutils.AdbClient("127.0.0.1", fake_adb.port).device(SERIAL)
    device.shell("log -t Probe marker line")
    dump = device.shell2("export ANDROID_LOG_TAGS=\"''\" ; exec logcat -d", v2=True)
    assert dump.returncode == 0 and "Probe: marker line" in dump.output
    result = device.shell2("export A=1 B=2; echo $A$B; exec false; echo never", v2=True)
    assert (result.returncode, result.output) == (1, "12\n")
    assert device.shell2("export 1x=2", v2=True).returncode == 1
