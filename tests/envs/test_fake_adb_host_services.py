"""Requests the adb server answers itself: network serials with colons, connect/disconnect,
wait-for with a transport, forward lists; answered as real adb does, with adb's error texts."""

from __future__ import annotations

import re
from collections.abc import Callable

import adbutils
import pytest

from simulators.fake_adb import FakeAdbServer
from simulators.fake_adb.host_services import split_host_prefix
from tests.envs.test_fake_adb_protocol import RawAdb, query

NETWORK = "127.0.0.1:5555"


@pytest.fixture
def networked(start_fake_adb: Callable[..., FakeAdbServer]) -> FakeAdbServer:
    return start_fake_adb(devices=2, serials=(NETWORK, "emulator-5556"))


def test_host_serial_keeps_a_network_serial_whole(networked: FakeAdbServer) -> None:
    port = networked.port
    assert query(port, f"host-serial:{NETWORK}:get-state") == ("OKAY", "device")
    assert query(port, f"host-serial:{NETWORK}:get-serialno") == ("OKAY", NETWORK)
    # Not served: cut the way adb cuts it (host:port stays whole), so the error names the whole serial.
    assert query(port, "host-serial:10.0.0.7:5555:get-state") == ("FAIL", "device '10.0.0.7:5555' not found")
    device = adbutils.AdbClient("127.0.0.1", port).device(NETWORK)
    assert device.get_state() == "device"
    assert device.shell("echo hi") == "hi"


@pytest.mark.parametrize(
    ("request_text", "expected"),
    [
        ("host-serial:emulator-5554:features", ("serial:emulator-5554", "features")),
        ("host-serial:10.0.0.7:5555:get-state", ("serial:10.0.0.7:5555", "get-state")),
        ("host-serial:tcp:10.0.0.7:5555:get-state", ("serial:tcp:10.0.0.7:5555", "get-state")),
        ("host-serial:[::1]:5555:get-state", ("serial:[::1]:5555", "get-state")),
        ("host-serial:weird:get-state", ("serial:weird", "get-state")),
        ("host-transport-id:3:get-state", ("id:3", "get-state")),
    ],
)
def test_split_host_prefix_of_unknown_serials(request_text: str, expected: tuple[str, str]) -> None:
    assert split_host_prefix(request_text, ["emulator-5554"]) == expected


def test_connect_and_disconnect_are_answered_by_the_server(networked: FakeAdbServer) -> None:
    client = adbutils.AdbClient("127.0.0.1", networked.port)  # two devices: no "more than one device"
    assert client.connect(NETWORK) == f"already connected to {NETWORK}"
    assert client.connect("127.0.0.1:1") == "failed to connect to '127.0.0.1:1': Connection refused"
    assert client.disconnect(NETWORK) == f"disconnected {NETWORK}"
    assert [d.serial for d in client.device_list()] == ["emulator-5556"]
    assert client.connect("127.0.0.1") == f"connected to {NETWORK}"  # port 5555 by default, as adb
    assert {d.serial for d in client.device_list()} == {NETWORK, "emulator-5556"}
    with pytest.raises(adbutils.AdbError, match=re.escape("no such device '1.2.3.4:5678'")):
        client.disconnect("1.2.3.4:5678", raise_error=True)


def test_wait_for_honours_transport_and_ambiguity(fake_adb: FakeAdbServer) -> None:
    client = adbutils.AdbClient("127.0.0.1", fake_adb.port)
    with pytest.raises(adbutils.AdbError, match="more than one device/emulator"):
        client.wait_for(timeout=5)
    client.wait_for("emulator-5554", transport="local", timeout=5)
    client.wait_for("emulator-5554", state="any", timeout=5)
    with pytest.raises(adbutils.AdbTimeout):  # emulators are never USB devices
        client.wait_for("emulator-5554", transport="usb", timeout=0.5)
    assert query(fake_adb.port, "host:wait-for-bluetooth-device")[0] == "FAIL"


def test_list_forward_per_device_and_for_the_server(fake_adb: FakeAdbServer) -> None:
    client = adbutils.AdbClient("127.0.0.1", fake_adb.port)
    # Forwards listen: tcp:0 lets the server pick free ports, named by the port in the listing.
    client.device("emulator-5554").forward("tcp:0", "tcp:1")
    client.device("emulator-5556").forward("tcp:0", "tcp:2")
    word, listing = query(fake_adb.port, "host-serial:emulator-5556:list-forward")
    assert word == "OKAY" and re.fullmatch(r"emulator-5556 tcp:\d+ tcp:2\n", listing or ""), listing
    assert len(query(fake_adb.port, "host:list-forward")[1].splitlines()) == 2
    raw = RawAdb(fake_adb.port)
    raw.send("host:killforward-all")
    assert raw.read(8) == b"OKAYOKAY"  # connected, done: the host's two-step answer (adb.cpp)
    raw.close()
    assert client.forward_list() == []
