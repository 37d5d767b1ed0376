"""Requests the adb server answers itself, before (or instead of) talking to a device.

``host:<query>`` asks about the server or "the one device"; ``host-serial:<serial>:<query>`` and
``host-transport-id:<n>:<query>`` about one device. Serials may contain colons (a network device is
``127.0.0.1:5555``), so the serial is matched against the served devices first and otherwise cut
the way adb cuts it (``host:port`` stays whole). Port forwards are host requests too (``forward``,
``killforward``, ``list-forward``); their listeners and traffic live in :mod:`forwards`.
Error texts are adb's own (AOSP ``adb/adb.cpp``, ``adb/services.cpp``, ``adb/transport.cpp``).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence

from simulators.fake_adb.device import FakeDevice
from simulators.fake_adb.forwards import ForwardTable
from simulators.fake_adb.wire import encode_block, send_fail, send_okay

# What the device advertises; clients pick shell v2 and stat v2 from it. Only what is implemented here.
DEVICE_FEATURES = "shell_v2,cmd,stat_v2,fixed_push_mkdir"
_WAIT_POLL_S = 0.05
_TRANSPORTS = ("any", "usb", "local")


class DeviceTable:
    """The devices a server serves, with adb's rules for picking one, and the server's forwards."""

    def __init__(self, devices: Sequence[FakeDevice], host: str = "127.0.0.1"):
        self.devices = list(devices)
        self.forwards = ForwardTable(host)  # forwards listen on the server's interface

    def present(self) -> list[FakeDevice]:
        return [device for device in self.devices if not device.killed]

    def find(self, selector: str, transport: str = "any") -> FakeDevice | str:
        """A device for ``serial:<s>``, ``id:<n>``, ``any``, ``local`` or ``usb``; or adb's error."""
        present = self.present()
        kind, _, value = selector.partition(":")
        if kind == "usb" or transport == "usb":  # emulators and network devices are never USB
            return "no devices found" if kind == "usb" else f"device '{value}' not found"
        if kind == "serial":
            matches = [device for device in present if device.serial == value]
            if not matches:
                return f"device '{value}' not found"
        elif kind == "id":
            matches = [device for device in present if str(device.transport_id) == value]
            if not matches:
                return f"no device with transport id '{value}'"
        else:  # any, local
            matches = present
            if not matches:
                return "no devices/emulators found"
            if len(matches) > 1:
                return "more than one device/emulator"
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


def _network_serial_end(rest: str) -> int:
    """Where adb's ``host-serial:`` parsing ends a serial it does not know: ``host:port`` stays whole."""
    start = 4 if rest.startswith(("tcp:", "udp:")) else 0
    if rest.startswith("[", start):  # [ipv6]:port
        start = max(start, rest.find("]", start) + 1)
    colon = rest.find(":", start)
    if colon < 0:
        return len(rest)
    port_end = colon + 1
    while port_end < len(rest) and rest[port_end].isdigit():
        port_end += 1
    if port_end > colon + 1 and (port_end == len(rest) or rest[port_end] == ":"):
        return port_end
    return colon


def split_host_prefix(request: str, serials: Sequence[str]) -> tuple[str, str]:
    """(device selector, query) for ``host:``, ``host-serial:<s>:``, ``host-transport-id:<n>:``, ..."""
    for prefix, selector in (("host-local:", "local"), ("host-usb:", "usb"), ("host:", "any")):
        if request.startswith(prefix):
            return selector, request.removeprefix(prefix)
    if request.startswith("host-serial:"):
        rest = request.removeprefix("host-serial:")
        known = [s for s in serials if rest.startswith(s + ":")]
        end = max(map(len, known)) if known else _network_serial_end(rest)
        return f"serial:{rest[:end]}", rest[end + 1 :]
    if request.startswith("host-transport-id:"):
        value, _, query = request.removeprefix("host-transport-id:").partition(":")
        return f"id:{value}", query
    return "", request


def host_query(
    sock: socket.socket, table: DeviceTable, version: int, request: str, request_kill: Callable[[], None]
) -> None:
    selector, query = split_host_prefix(request, [device.serial for device in table.devices])
    if not selector:
        send_fail(sock, f"unknown host service '{request}': connect to a device with host:transport first")
        return
    if selector == "any" and _server_query(sock, table, version, query, request_kill):
        return
    if query.startswith("wait-for-"):
        _wait_for(sock, table, selector, query)
        return
    if query == "list-forward":  # per device: that device's forwards only
        found = table.find(selector)
        send_okay(sock, table.forwards.listing(None if isinstance(found, str) else found.serial))
        return
    found = table.find(selector)
    if isinstance(found, str):
        send_fail(sock, found)
        return
    if query.startswith(("forward:", "killforward")):
        _forward(sock, table, found, query)
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
        send_fail(sock, f"unknown host service '{query}'")


def _server_query(
    sock: socket.socket, table: DeviceTable, version: int, query: str, request_kill: Callable[[], None]
) -> bool:
    """Queries about the server itself; False when ``query`` is about a device after all."""
    if query == "version":
        send_okay(sock, f"{version:04x}")
    elif query in ("devices", "devices-l"):
        send_okay(sock, table.listing(long=query == "devices-l"))
    elif query == "track-devices":
        _track_devices(sock, table)
    elif query == "host-features":
        send_okay(sock, DEVICE_FEATURES)
    elif query == "kill":
        send_okay(sock)
        request_kill()
    elif query == "list-forward":
        send_okay(sock, table.forwards.listing())
    elif query == "killforward-all":  # every device's forwards
        table.forwards.remove_all()
        sock.sendall(b"OKAYOKAY")
    elif query.startswith("connect:"):
        send_okay(sock, _connect(table, query.removeprefix("connect:")))
    elif query.startswith("disconnect:"):
        _disconnect(sock, table, query.removeprefix("disconnect:"))
    else:
        return False
    return True


def _with_port(address: str) -> str:
    return address if address.rpartition(":")[2].isdigit() else f"{address}:5555"


def _connect(table: DeviceTable, address: str) -> str:
    """``adb connect``: OKAY and a message either way, as adb answers (the client prints it)."""
    address = _with_port(address)
    for device in table.devices:
        if device.serial == address:
            if not device.killed:
                return f"already connected to {address}"
            device.killed = False
            return f"connected to {address}"
    return f"failed to connect to '{address}': Connection refused"


def _disconnect(sock: socket.socket, table: DeviceTable, address: str) -> None:
    networked = [device for device in table.present() if ":" in device.serial]
    if not address:
        for device in networked:
            device.killed = True
        send_okay(sock, "disconnected everything")
        return
    address = _with_port(address)
    for device in networked:
        if device.serial == address:
            device.killed = True
            send_okay(sock, f"disconnected {address}")
            return
    send_fail(sock, f"no such device '{address}'")


def _forward(sock: socket.socket, table: DeviceTable, device: FakeDevice, query: str) -> None:
    """``forward:[norebind:]<local>;<remote>``, ``killforward:<local>``, ``killforward-all``.

    On success the host answers OKAY twice (connected, done), and after a ``forward`` of ``tcp:0`` the
    port it picked; on failure one FAIL (adb.cpp)."""
    if query == "killforward-all":
        table.forwards.remove_all(device.serial)
    elif query.startswith("killforward:"):
        local = query.removeprefix("killforward:")
        if not table.forwards.remove(local):
            send_fail(sock, f"listener '{local}' not found")
            return
    else:
        spec = query.removeprefix("forward:")
        norebind = spec.startswith("norebind:")
        local, sep, remote = spec.removeprefix("norebind:").partition(";")
        if not sep or not local or not remote:
            send_fail(sock, f"malformed forward spec '{spec}'")
            return
        port = table.forwards.add(device, local, remote, norebind)
        if isinstance(port, str):
            send_fail(sock, port)
            return
        if local == "tcp:0":
            sock.sendall(b"OKAY")
            send_okay(sock, str(port))
            return
    sock.sendall(b"OKAYOKAY")


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
    """``wait-for-<transport>-<state>``: OKAY now, then OKAY once a matching device is in that state,
    or FAIL when the choice is ambiguous ("more than one device/emulator"), as adb does."""
    transport, _, wanted = query.removeprefix("wait-for-").partition("-")
    if transport not in _TRANSPORTS or not wanted:
        send_fail(sock, f"bad wait-for request '{query}': use wait-for-<any|usb|local>-<state>")
        return
    if selector == "any" and transport != "any":
        selector = transport
    send_okay(sock)
    sock.settimeout(_WAIT_POLL_S)
    while True:
        found = table.find(selector, transport)
        if isinstance(found, str) and found.startswith("more than one"):
            send_fail(sock, found)
            return
        state = "disconnect" if isinstance(found, str) else found.state
        if state == wanted or (wanted == "any" and state != "disconnect"):
            send_okay(sock)
            return
        try:
            if not sock.recv(1):
                return
        except TimeoutError:
            continue
