"""What the fake adb server does with one client connection.

A connection starts with host requests (AOSP ``adb/SERVICES.TXT``). Most are one-shot queries
(``host:version``, ``host:devices``, ``host-serial:<serial>:features`` ...) answered with ``OKAY`` and a
length-prefixed string, after which the server closes the socket. ``host:transport:<serial>`` (and its
``-any``/``-id`` forms) and ``host:tport:...`` (which also sends the 8-byte transport id) bind the socket
to a device; the next request then names a device service: ``shell:``/``shell,v2,...:`` (command
output, raw or as shell-protocol packets), ``exec:`` (raw, what ``adb exec-out`` uses) or ``sync:``.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Sequence

from distrl_core.envs.fake_adb.device import FakeDevice
from distrl_core.envs.fake_adb.shell import ShellOutput, run_shell
from distrl_core.envs.fake_adb.sync_service import serve_sync
from distrl_core.envs.fake_adb.wire import close_gracefully, encode_block, read_request, send_fail, send_okay
from distrl_core.envs.simdroid.faults import DeviceOffline

# What the device advertises; clients pick shell v2 and stat v2 from it. Only what is implemented here.
DEVICE_FEATURES = "shell_v2,cmd,stat_v2,fixed_push_mkdir"
# Shell protocol v2 packet ids (AOSP adb/shell_protocol.h).
SHELL_STDOUT, SHELL_STDERR, SHELL_EXIT = 1, 2, 3
_SHELL_PACKET = struct.Struct("<BI")
_WAIT_POLL_S = 0.05


class DeviceTable:
    """The devices a server serves, with adb's rules for picking one."""

    def __init__(self, devices: Sequence[FakeDevice]):
        self.devices = list(devices)

    def present(self) -> list[FakeDevice]:
        return [device for device in self.devices if not device.killed]

    def find(self, selector: str) -> FakeDevice | str:
        """A device for ``serial:<s>``, ``id:<n>``, ``any``, ``local`` or ``usb``; or an error message."""
        present = self.present()
        kind, _, value = selector.partition(":")
        if kind == "serial":
            matches = [device for device in present if device.serial == value]
            if not matches:
                return f"device '{value}' not found"
        elif kind == "id":
            matches = [device for device in present if str(device.transport_id) == value]
            if not matches:
                return f"no device with transport id '{value}'"
        elif kind in ("any", "local"):
            matches = present
            if not matches:
                return "no devices/emulators found"
            if len(matches) > 1:
                return "more than one device/emulator"
        else:  # usb: emulators are never USB devices
            return "no devices/emulators found"
        return matches[0]

    def listing(self, long: bool) -> str:
        lines = []
        for device in self.present():
            if long:
                lines.append(
                    f"{device.serial:<22} {device.state} product:sdk_gphone64_x86_64 "
                    f"model:sdk_gphone64_x86_64 device:emu64xa transport_id:{device.transport_id}"
                )
            else:
                lines.append(f"{device.serial}\t{device.state}")
        return "".join(line + "\n" for line in lines)


def handle_connection(
    sock: socket.socket, table: DeviceTable, version: int, request_kill: Callable[[], None]
) -> None:
    """Serve one client socket until its conversation ends; always closes ``sock``."""
    try:
        request = read_request(sock)
        if request.startswith("host:transport") or request.startswith("host:tport:"):
            device = _bind_transport(sock, table, request)
            if device is not None:
                _serve_device(sock, device, read_request(sock))
            return
        _host_query(sock, table, version, request, request_kill)
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


def _split_host_prefix(request: str) -> tuple[str, str]:
    """(device selector, query) for ``host:``, ``host-serial:<s>:``, ``host-transport-id:<n>:``, ..."""
    for prefix, selector in (("host-local:", "local"), ("host-usb:", "usb"), ("host:", "any")):
        if request.startswith(prefix):
            return selector, request.removeprefix(prefix)
    for prefix, kind in (("host-serial:", "serial"), ("host-transport-id:", "id")):
        if request.startswith(prefix):
            value, _, query = request.removeprefix(prefix).partition(":")
            return f"{kind}:{value}", query
    return "", request


def _host_query(
    sock: socket.socket, table: DeviceTable, version: int, request: str, request_kill: Callable[[], None]
) -> None:
    selector, query = _split_host_prefix(request)
    if not selector:
        send_fail(sock, f"unknown host service '{request}': connect to a device with host:transport first")
        return
    if selector == "any":  # queries about the server itself
        if query == "version":
            send_okay(sock, f"{version:04x}")
            return
        if query in ("devices", "devices-l"):
            send_okay(sock, table.listing(long=query == "devices-l"))
            return
        if query == "track-devices":
            _track_devices(sock, table)
            return
        if query == "host-features":
            send_okay(sock, DEVICE_FEATURES)
            return
        if query == "kill":
            send_okay(sock)
            request_kill()
            return
        if query == "list-forward":
            send_okay(sock, "")
            return
    if query.startswith("wait-for-"):
        _wait_for(sock, table, selector, query)
        return
    found = table.find(selector)
    if isinstance(found, str):
        send_fail(sock, found)
        return
    answers = {
        "features": DEVICE_FEATURES,
        "get-state": found.state,
        "get-serialno": found.serial,
        "get-devpath": "unknown",
    }
    if query in answers:
        send_okay(sock, answers[query])
    else:
        send_fail(sock, f"'{query}' is not supported by the fake adb server")


def _track_devices(sock: socket.socket, table: DeviceTable) -> None:
    send_okay(sock)
    last = None
    sock.settimeout(_WAIT_POLL_S)
    while True:
        listing = table.listing(long=False)
        if listing != last:
            sock.sendall(encode_block(listing))
            last = listing
        try:
            if not sock.recv(1):  # the client closed: stop tracking
                return
        except TimeoutError:
            continue


def _wait_for(sock: socket.socket, table: DeviceTable, selector: str, query: str) -> None:
    """``wait-for-<transport>-<state>``: OKAY now, OKAY again once the state is reached."""
    wanted = query.rsplit("-", 1)[-1]
    send_okay(sock)
    sock.settimeout(_WAIT_POLL_S)
    while True:
        found = table.find(selector)
        state = "disconnect" if isinstance(found, str) else found.state
        if state == wanted or (wanted == "any" and state == "device"):
            send_okay(sock)
            return
        try:
            if not sock.recv(1):
                return
        except TimeoutError:
            continue


def _serve_device(sock: socket.socket, device: FakeDevice, request: str) -> None:
    service, _, argument = request.partition(":")
    name, *options = service.split(",")
    if name == "sync" and not argument:
        send_okay(sock)
        serve_sync(sock, device)
        return
    if name not in ("shell", "exec"):
        send_fail(sock, f"'{request}' is not supported by the fake device (shell:, exec:, sync: are)")
        return
    if not argument.strip():
        send_fail(sock, "an interactive shell is not supported by the fake device: give a command")
        return
    send_okay(sock)
    try:
        result = run_shell(device, argument)
    except DeviceOffline:
        # The transport vanished under the command: the client sees the stream end without an exit status.
        sock.shutdown(socket.SHUT_RDWR)
        return
    if name == "shell" and "v2" in options:
        _send_shell_v2(sock, result)
    else:
        sock.sendall(result.merged)


def _send_shell_v2(sock: socket.socket, result: ShellOutput) -> None:
    packets = bytearray()
    for packet_id, data in ((SHELL_STDOUT, result.stdout), (SHELL_STDERR, result.stderr)):
        if data:
            packets += _SHELL_PACKET.pack(packet_id, len(data)) + data
    packets += _SHELL_PACKET.pack(SHELL_EXIT, 1) + bytes([result.exit_code & 0xFF])
    sock.sendall(packets)
