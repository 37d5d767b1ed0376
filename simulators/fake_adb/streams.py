"""Shell commands that run until the client hangs up: a following ``logcat``.

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
import time

from simulators.fake_adb.commands_debug import format_log, logcat_format, logcat_problem
from simulators.fake_adb.device import FakeDevice
from simulators.fake_adb.shell_syntax import ShellSyntaxError, parse
from simulators.fake_adb.terminal import SHELL_STDOUT

_POLL_S = 0.1  # how often a waiting logcat looks for a hung-up client or a stopping server
_DUMP_OPTIONS = ("-d", "-c", "--clear", "-t")
HEARTBEAT_S = 0.5


def following_logcat_args(line: str) -> list[str] | None:
    """logcat's arguments when ``line`` is a lone logcat that follows the log, else None.

    Debian's ``adb logcat`` sends ``export ANDROID_LOG_TAGS="''"; exec logcat``: leading ``export``s
    and an ``exec`` before the logcat still make it the whole command line."""
    try:
        pipelines = parse(line)
    except ShellSyntaxError:
        return None
    if not pipelines:
        return None
    *setup, last = pipelines
    if len(last.commands) != 1 or last.commands[0].redirects:
        return None
    if any(len(p.commands) != 1 or p.commands[0].words[0].expand(0) != "export" for p in setup):
        return None
    argv = [word.expand(0) for word in last.commands[0].words]
    if argv[0] == "exec":
        argv = argv[1:]
    args = argv[1:]
    if argv[:1] != ["logcat"] or any(arg in _DUMP_OPTIONS for arg in args) or logcat_problem(args):
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
                sock.sendall(struct.pack("<BI", SHELL_STDOUT, len(data)) + data if shell_v2 else data)
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
