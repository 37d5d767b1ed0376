"""A hostile ADB client against the fake server: half-open connections, garbage and huge declared
lengths, abrupt resets. The server must keep answering and give every thread back."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import adbutils
import pytest

from simulators.fake_adb import FakeAdbConfig, FakeAdbServer

IDLE_S = 0.3


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeAdbServer]:
    monkeypatch.setenv("ADBUTILS_ADB_PATH", "/bin/false")  # never spawn a real adb daemon
    token = tmp_path / "token"
    token.write_text("t\n")
    config = FakeAdbConfig(devices=1, idle_timeout_s=IDLE_S, console_auth_token_path=token)
    with FakeAdbServer(config) as started:
        yield started


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _wait_until(condition: Callable[[], bool], limit_s: float = 30.0) -> bool:
    # A deadline only so that a regression fails instead of hanging; the assertion is the condition.
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def _request(text: str) -> bytes:
    return f"{len(text):04x}{text}".encode()


def _healthy(server: FakeAdbServer) -> bool:
    device = adbutils.AdbClient("127.0.0.1", server.port).device("emulator-5554")
    return device.shell("echo alive") == "alive"


HALF_OPEN = {
    "silent": b"",
    "partial_header": b"00",
    "header_without_payload": b"0010host",
    "huge_declared_length": b"ffff" + b"x" * 100,
}


def test_half_open_connections_are_closed_after_the_idle_timeout(server: FakeAdbServer) -> None:
    baseline = threading.active_count()
    held = [_connect(server.port) for _ in range(50) for _ in HALF_OPEN]
    for i, sock in enumerate(held):
        data = list(HALF_OPEN.values())[i % len(HALF_OPEN)]
        if data:
            sock.sendall(data)
    # The clients never close: only the server's idle timeout can end these conversations.
    still_open = 0
    deadline = time.monotonic() + 30.0  # one bound for all, so that a regression fails, not hangs
    for sock in held:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            while sock.recv(4096):
                pass  # e.g. a FAIL for a request the server could not read
        except TimeoutError:
            still_open += 1
        sock.close()
    assert still_open == 0, f"{still_open} of {len(held)} half-open connections were never closed"
    assert _wait_until(lambda: threading.active_count() <= baseline), (
        f"{threading.active_count() - baseline} server threads still held"
    )
    assert _healthy(server)


def test_garbage_lengths_and_abrupt_resets_leave_the_server_serving(server: FakeAdbServer) -> None:
    baseline = threading.active_count()
    for payload in (b"zzzz", b"-001", b"\xff\xfe\x00\x01", b"0004host:nope", b"\x00" * 64):
        with _connect(server.port) as sock:
            sock.sendall(payload)
    for _ in range(50):  # RST mid-request: SO_LINGER 0 makes close() reset the connection
        sock = _connect(server.port)
        sock.sendall(b"000chost:ver")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    # A sync request that declares a 4 GiB path: refused, not read.
    sock = _connect(server.port)
    sock.sendall(_request("host:transport-any"))
    assert sock.recv(4) == b"OKAY"
    sock.sendall(_request("sync:") + b"STAT" + struct.pack("<I", 0xFFFFFFFF))
    answer = b""
    while chunk := sock.recv(4096):
        answer += chunk
    assert answer.startswith(b"OKAYFAIL") and b"too long" in answer
    sock.close()
    assert _healthy(server)
    assert _wait_until(lambda: threading.active_count() <= baseline)
