"""Port forwards that carry traffic, and the device-side endpoints they reach.

``adb forward tcp:LOCAL REMOTE`` makes the server listen on ``LOCAL`` on the host; each connection
accepted there opens ``REMOTE`` on the device and bytes flow both ways until either side closes
(AOSP ``adb/adb_listeners.cpp``). A fake device runs no programs, so what listens on it is fixed:

- ``tcp:7``: an echo service (RFC 862), whatever is sent comes back;
- any device port an ``adb reverse`` listens on: the connection goes on to the reverse's host target
  (``adb reverse tcp:8000 tcp:HOSTPORT``, then ``adb forward tcp:X tcp:8000`` reaches HOSTPORT), so a
  test can put any TCP service of its own "on the device";
- nothing else: like a closed port on a phone, the connection is accepted on the host and then closed.

The same endpoints answer a client that opens ``tcp:PORT`` on a device directly (adbutils'
``create_connection``). Forwards listen on the server's own interface (loopback by default), and
only ``tcp:`` local specs listen; other local specs (``localabstract:`` ...) are refused.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass

from simulators.fake_adb.device import FakeDevice
from simulators.fake_adb.tcp import TcpService

ECHO_PORT = 7
_POLL_S = 0.1
_CONNECT_TIMEOUT_S = 5.0

Endpoint = Callable[[socket.socket], None]


def device_endpoint(device: FakeDevice, spec: str) -> Endpoint | None:
    """What answers a connection to ``spec`` (``tcp:PORT``) on the device, or None when nothing does."""
    if device.killed or not device.phone.online:
        return None
    if spec in (f"tcp:{ECHO_PORT}", f"tcp:localhost:{ECHO_PORT}", f"tcp:127.0.0.1:{ECHO_PORT}"):
        return lambda sock: _echo(sock, device.stopping)
    with device.lock:
        target = device.reverses.get(spec)
    if target is None or not target.startswith("tcp:") or not target[4:].isdigit():
        return None
    return lambda sock: _relay_to_host(sock, int(target[4:]), device.stopping)


def _echo(sock: socket.socket, stopping: threading.Event) -> None:
    while not stopping.is_set():
        readable, _, _ = select.select([sock], [], [], _POLL_S)
        if not readable:
            continue
        data = sock.recv(65536)
        if not data:
            break
        sock.sendall(data)
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


def _relay_to_host(sock: socket.socket, port: int, stopping: threading.Event) -> None:
    try:
        target = socket.create_connection(("127.0.0.1", port), timeout=_CONNECT_TIMEOUT_S)
    except OSError:
        return  # nothing listens there: the client's connection just closes, as on a device
    with target:
        relay(sock, target, stopping)


def relay(first: socket.socket, second: socket.socket, stopping: threading.Event) -> None:
    """Copy bytes both ways until both directions have ended; an end of input on one side is passed
    on as a half-close of the other, so request/response protocols see the peer's EOF."""
    peers = {first: second, second: first}
    while peers and not stopping.is_set():
        readable, _, _ = select.select(list(peers), [], [], _POLL_S)
        for source in readable:
            try:
                data = source.recv(65536)
                if data:
                    peers[source].sendall(data)
                    continue
            except OSError:  # reset by one side: the whole stream is over
                return
            with contextlib.suppress(OSError):
                peers[source].shutdown(socket.SHUT_WR)
            del peers[source]


@dataclass
class Forward:
    serial: str
    local: str
    remote: str
    device: FakeDevice
    listener: TcpService | None = None  # set once bound


class ForwardTable:
    """The server's forwards, each with its listening socket, in the order they were made."""

    def __init__(self, host: str) -> None:
        self.host = host
        self._forwards: list[Forward] = []
        self._lock = threading.Lock()

    def add(self, device: FakeDevice, local: str, remote: str, norebind: bool) -> str | int:
        """Forward ``local`` to ``remote`` on ``device``: the port that now listens, or adb's error.

        Like adb, forwarding a ``local`` again points the existing listener at the new target."""
        with self._lock:
            existing = next((row for row in self._forwards if row.local == local), None)
            if existing is not None:
                if norebind:
                    return "cannot rebind existing socket"
                existing.serial, existing.remote, existing.device = device.serial, remote, device
                return int(existing.local.removeprefix("tcp:"))
            kind, _, port = local.partition(":")
            if kind != "tcp" or not port.isdigit() or int(port) > 65535:
                return f"cannot bind listener: the fake server listens on tcp:PORT only, not '{local}'"
            forward = Forward(device.serial, local, remote, device)
            try:
                listener = TcpService(
                    self.host,
                    int(port),
                    lambda sock: self._serve(forward, sock),
                    f"fake-forward-{local}",
                    None,
                )
            except OSError as error:
                return f"cannot bind listener: {error.strerror or error}"
            forward.listener = listener
            if port == "0":  # the kernel picked the port: the listener goes by its real name
                forward.local = f"tcp:{listener.port}"
            listener.start()
            self._forwards.append(forward)
            return listener.port

    @staticmethod
    def _serve(forward: Forward, sock: socket.socket) -> None:
        endpoint = device_endpoint(forward.device, forward.remote)
        if endpoint is not None:
            endpoint(sock)

    def remove(self, local: str) -> bool:
        with self._lock:
            found = [row for row in self._forwards if row.local == local]
            self._forwards = [row for row in self._forwards if row.local != local]
        _stop(found)
        return bool(found)

    def remove_all(self, serial: str | None = None) -> None:
        """Every forward of ``serial`` (None: of every device)."""
        with self._lock:
            found = [row for row in self._forwards if serial is None or row.serial == serial]
            self._forwards = [row for row in self._forwards if row not in found]
        _stop(found)

    def listing(self, serial: str | None = None) -> str:
        with self._lock:
            rows = [row for row in self._forwards if serial is None or row.serial == serial]
        return "".join(f"{row.serial} {row.local} {row.remote}\n" for row in rows)


def _stop(forwards: list[Forward]) -> None:
    for forward in forwards:
        if forward.listener is not None:
            forward.listener.stop()
