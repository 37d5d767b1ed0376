"""What the fake adb server does with one client connection.

A connection starts with host requests (AOSP ``adb/SERVICES.TXT``). Most are one-shot queries
(``host:version``, ``host:devices``, ``host-serial:<serial>:features`` ...) answered with ``OKAY`` and a
length-prefixed string, after which the server closes the socket. ``host:transport:<serial>`` (and its
``-any``/``-id`` forms) and ``host:tport:...`` (which also sends the 8-byte transport id) bind the socket
to a device; the next request then names a device service: ``shell:``/``shell,v2,...:`` (command
output, raw or as shell-protocol packets; an empty command is an interactive shell), ``exec:`` (raw,
what ``adb exec-out`` uses), ``sync:``, ``reverse:``, ``framebuffer:`` (the raw screen, as adbd's
framebuffer_service sends it) or ``tcp:PORT`` (a connection to a port on the device, see
:mod:`forwards`). A ``host:`` request on a bound socket asks the server about that device: Debian's
``adb forward`` switches to the device first and then sends ``host:forward:...``.
"""

from __future__ import annotations

import io
import socket
import struct
from collections.abc import Callable

from PIL import Image

from simulators.fake_adb.device import FakeDevice
from simulators.fake_adb.forwards import device_endpoint
from simulators.fake_adb.host_services import DeviceTable, host_query
from simulators.fake_adb.interactive_shell import serve_interactive_shell, wants_pty
from simulators.fake_adb.shell import ShellOutput, ShellSession, run_shell
from simulators.fake_adb.streams import follow_logcat, following_logcat_args
from simulators.fake_adb.sync_service import serve_sync
from simulators.fake_adb.terminal import SocketTerminal
from simulators.fake_adb.wire import close_gracefully, read_request, send_fail, send_okay
from simulators.simdroid.faults import DeviceOffline

# Shell protocol v2 packet ids (AOSP adb/shell_protocol.h).
SHELL_STDOUT, SHELL_STDERR, SHELL_EXIT = 1, 2, 3
_SHELL_PACKET = struct.Struct("<BI")
# adbd's fbinfo, version 2: version, bpp, color space, size, width, height, then offset and length of
# red, blue, green and alpha (AOSP adb/daemon/framebuffer_service.cpp), all little-endian uint32.
_FB_HEADER = struct.Struct("<14I")
_FB_VERSION, _FB_SRGB = 2, 1


def handle_connection(
    sock: socket.socket, table: DeviceTable, version: int, request_kill: Callable[[], None]
) -> None:
    """Serve one client socket until its conversation ends; always closes ``sock``."""
    try:
        request = read_request(sock)
        if request.startswith(("host:transport", "host:tport:")):
            device = _bind_transport(sock, table, request)
            if device is None:
                return
            request = read_request(sock)
            if request.startswith("host:"):  # about the bound device, e.g. host:forward:...
                query = f"host-transport-id:{device.transport_id}:{request.removeprefix('host:')}"
                host_query(sock, table, version, query, request_kill)
            else:
                _serve_device(sock, device, request)
            return
        host_query(sock, table, version, request, request_kill)
    finally:
        close_gracefully(sock)


def _bind_transport(sock: socket.socket, table: DeviceTable, request: str) -> FakeDevice | None:
    if request.startswith("host:tport:"):
        selector = request.removeprefix("host:tport:")
    elif request.startswith("host:transport:"):
        selector = "serial:" + request.removeprefix("host:transport:")
    elif request.startswith("host:transport-id:"):
        selector = "id:" + request.removeprefix("host:transport-id:")
    else:  # host:transport-any / -local / -usb
        selector = request.removeprefix("host:transport-")
    found = table.find(selector)
    if isinstance(found, str):
        send_fail(sock, found)
        return None
    if found.state != "device":
        send_fail(
            sock, f"device offline ({found.serial} is not responding; wait for it to come back or restart it)"
        )
        return None
    send_okay(sock)
    if request.startswith("host:tport:"):
        sock.sendall(struct.pack("<Q", found.transport_id))
    return found


def _serve_device(sock: socket.socket, device: FakeDevice, request: str) -> None:
    service, _, argument = request.partition(":")
    name, *options = service.split(",")
    if name == "sync" and not argument:
        send_okay(sock)
        serve_sync(sock, device)
        return
    if name == "reverse":
        _reverse(sock, device, argument)
        return
    if name == "framebuffer" and not argument:
        _framebuffer(sock, device)
        return
    if name == "tcp":
        _connect(sock, device, request)
        return
    if name in ("shell", "exec"):
        _shell(sock, device, name, options, argument)
        return
    send_fail(
        sock,
        f"'{request}' is not supported by the fake device "
        "(shell:, exec:, sync:, reverse:, framebuffer:, tcp: are)",
    )


def _shell(sock: socket.socket, device: FakeDevice, name: str, options: list[str], argument: str) -> None:
    """``shell[,v2,...]:COMMAND`` or ``exec:COMMAND``; ``shell...:`` alone is an interactive shell."""
    shell_v2 = name == "shell" and "v2" in options
    if not argument.strip():
        if name == "exec":
            send_fail(sock, "exec: without a command: give a command (exec:screencap -p)")
            return
        send_okay(sock)
        serve_interactive_shell(sock, device, shell_v2, wants_pty(options, shell_v2))
        return
    send_okay(sock)
    logcat_args = following_logcat_args(argument)
    if logcat_args is not None:
        follow_logcat(sock, device, logcat_args, shell_v2=shell_v2)
        return
    try:
        # What the client types reaches `read` (adbutils' screen recorder waits on it for "stop").
        result = run_shell(
            device, argument, ShellSession(terminal=SocketTerminal(sock, shell_v2, device.stopping))
        )
    except DeviceOffline:
        # The transport vanished under the command: the client sees the stream end without an exit status.
        sock.shutdown(socket.SHUT_RDWR)
        return
    if shell_v2:
        _send_shell_v2(sock, result)
    else:
        sock.sendall(result.merged)


def _connect(sock: socket.socket, device: FakeDevice, spec: str) -> None:
    """``tcp:PORT``: a stream to what listens on that port of the device, refused when nothing does."""
    endpoint = device_endpoint(device, spec)
    if endpoint is None:
        send_fail(sock, "closed")  # what adb reports when the device refuses the connection
        return
    send_okay(sock)
    endpoint(sock)


def _send_shell_v2(sock: socket.socket, result: ShellOutput) -> None:
    packets = bytearray()
    for packet_id, data in ((SHELL_STDOUT, result.stdout), (SHELL_STDERR, result.stderr)):
        if data:
            packets += _SHELL_PACKET.pack(packet_id, len(data)) + data
    packets += _SHELL_PACKET.pack(SHELL_EXIT, 1) + bytes([result.exit_code & 0xFF])
    sock.sendall(packets)


def _reverse(sock: socket.socket, device: FakeDevice, request: str) -> None:
    """``reverse:forward|killforward|killforward-all|list-forward``: the device's own listener list.

    ``list-forward`` answers OKAY and the listing; the others OKAY when opened, then OKAY or FAIL.
    """
    with device.lock:
        if request == "list-forward":
            listing = "".join(f"(reverse) {remote} {local}\n" for remote, local in device.reverses.items())
            send_okay(sock, listing)
            return
        send_okay(sock)
        if request == "killforward-all":
            device.reverses.clear()
            send_okay(sock)
        elif request.startswith("killforward:"):
            remote = request.removeprefix("killforward:")
            if device.reverses.pop(remote, None) is None:
                send_fail(sock, f"listener '{remote}' not found")
            else:
                send_okay(sock)
        elif request.startswith("forward:"):
            spec = request.removeprefix("forward:")
            norebind = spec.startswith("norebind:")
            remote, sep, local = spec.removeprefix("norebind:").partition(";")
            if not sep or not remote or not local:
                send_fail(sock, f"malformed forward spec '{spec}'")
            elif norebind and remote in device.reverses:
                send_fail(sock, "cannot rebind existing socket")
            else:
                device.reverses[remote] = local
                send_okay(sock)
        else:
            send_fail(sock, f"unknown reverse request '{request}'")


def _framebuffer(sock: socket.socket, device: FakeDevice) -> None:
    """The screen as 32-bit RGBA after adbd's version-2 header, then the stream ends."""
    try:
        with device.lock:
            png = device.phone.screenshot_png()
    except DeviceOffline:
        send_fail(sock, "device offline")
        return
    with Image.open(io.BytesIO(png)) as image:
        rgba = image.convert("RGBA")
    pixels = rgba.tobytes()
    width, height = rgba.size
    send_okay(sock)
    sock.sendall(
        _FB_HEADER.pack(_FB_VERSION, 32, _FB_SRGB, len(pixels), width, height, 0, 8, 16, 8, 8, 8, 24, 8)
        + pixels
    )
