"""Shell commands that run until the client hangs up (a following ``logcat``), and the client's
side of a shell connection as a terminal (:class:`SocketTerminal`, for ``read``).

A plain ``logcat`` (no ``-d``, ``-c`` or ``-t``) sent as the whole command line prints the log kept so
far, then each new line as it is logged (``log``, activity starts), until the client closes the
connection (adbd then hangs the process up), the server stops or the device goes offline. Inside a
pipeline or with a redirection it dumps and returns instead, as ``logcat -d`` does.

A real device's log is never quiet for long, and clients rely on that: adbutils' ``logcat().stop()``
returns only once its reader gets the next line. So while a logcat follows, the fake logs a
``D/SimDroid: heartbeat`` line after each ``HEARTBEAT_S`` without any other line.
"""

from __future__ import annotations

import select
import socket
import struct
import threading
import time

from distrl_core.envs.fake_adb.commands_debug import format_log, logcat_format, logcat_problem
from distrl_core.envs.fake_adb.device import FakeDevice
from distrl_core.envs.fake_adb.shell_syntax import ShellSyntaxError, parse

_SHELL_STDIN, _SHELL_STDOUT, _SHELL_CLOSE_STDIN = 0, 1, 3
_POLL_S = 0.1  # how often a waiting logcat looks for a hung-up client or a stopping server
_DUMP_OPTIONS = ("-d", "-c", "--clear", "-t")
HEARTBEAT_S = 0.5


def following_logcat_args(line: str) -> list[str] | None:
    """logcat's arguments when ``line`` is a lone logcat that follows the log, else None."""
    try:
        pipelines = parse(line)
    except ShellSyntaxError:
        return None
    if len(pipelines) != 1 or len(pipelines[0].commands) != 1 or pipelines[0].commands[0].redirects:
        return None
    argv = [word.expand(0) for word in pipelines[0].commands[0].words]
    args = argv[1:]
    if argv[0] != "logcat" or any(arg in _DUMP_OPTIONS for arg in args) or logcat_problem(args):
        return None
    return args


def follow_logcat(sock: socket.socket, device: FakeDevice, args: list[str], shell_v2: bool) -> None:
    """Stream the log to ``sock`` until the client hangs up, the server stops or the device goes away."""
    layout = logcat_format(args)
    position = 0
    quiet_since = time.monotonic()
    while not device.stopping.is_set() and device.phone.online:
        entries, position = device.log_since(position)
        if entries:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= HEARTBEAT_S:
            device.log("SimDroid", "heartbeat", "D")
            continue
        data = "".join(format_log(entry, layout) for entry in entries).encode()
        try:
            if data:
                sock.sendall(struct.pack("<BI", _SHELL_STDOUT, len(data)) + data if shell_v2 else data)
            if _hung_up(sock):
                return
        except OSError:  # reset by the client
            return
        with device.log_written:
            if device.log_count == position:
                device.log_written.wait(_POLL_S)


def _hung_up(sock: socket.socket) -> bool:
    """Whether the client closed its side; what it types (stdin) is read and ignored, as logcat does."""
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable) and not sock.recv(65536)


class SocketTerminal:
    """The client's side of a shell connection as the shell's terminal, for ``read``.

    Shell v1 carries what the client types as raw bytes; shell v2 as stdin packets (id 0), with a
    close-stdin packet (id 3) for end of input. Reading gives up when the server stops.
    """

    def __init__(self, sock: socket.socket, shell_v2: bool, stopping: threading.Event) -> None:
        self._sock, self._shell_v2, self._stopping = sock, shell_v2, stopping
        self._buffer = bytearray()  # what the client typed, not yet read
        self._raw = bytearray()  # v2 packet bytes not yet complete
        self._ended = False

    def readline(self) -> bytes | None:
        while b"\n" not in self._buffer and not self._ended:
            if self._stopping.is_set():
                return None
            readable, _, _ = select.select([self._sock], [], [], _POLL_S)
            if not readable:
                continue
            try:
                chunk = self._sock.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                self._ended = True
            elif self._shell_v2:
                self._unpack(chunk)
            else:
                self._buffer += chunk
        end = self._buffer.find(b"\n") + 1 or len(self._buffer)
        line = bytes(self._buffer[:end])
        del self._buffer[:end]
        return line or None

    def _unpack(self, chunk: bytes) -> None:
        self._raw += chunk
        while len(self._raw) >= 5:
            packet_id, length = struct.unpack_from("<BI", self._raw)
            if len(self._raw) < 5 + length:
                return
            if packet_id == _SHELL_STDIN:
                self._buffer += self._raw[5 : 5 + length]
            elif packet_id == _SHELL_CLOSE_STDIN:
                self._ended = True
            del self._raw[: 5 + length]
