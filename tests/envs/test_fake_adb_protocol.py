"""The fake ADB server on the wire: a hand-written client checks the bytes of the host, shell and sync
protocols (AOSP OVERVIEW.TXT, SERVICES.TXT, SYNC.TXT), without adbutils in between."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable

import pytest

from simulators.fake_adb import FakeAdbServer
from simulators.simdroid import FaultConfig, get_task


class RawAdb:
    """A minimal smart-socket client."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)

    def send(self, request: str) -> None:
        data = request.encode()
        self.sock.sendall(f"{len(data):04x}".encode() + data)

    def read(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            assert chunk, f"connection closed after {len(data)} of {size} bytes"
            data += chunk
        return data

    def status(self) -> tuple[str, str | None]:
        """('OKAY', None) or ('FAIL', message)."""
        word = self.read(4).decode()
        if word == "FAIL":
            return word, self.block()
        return word, None

    def block(self) -> str:
        return self.read(int(self.read(4), 16)).decode()

    def read_all(self) -> bytes:
        data = b""
        while chunk := self.sock.recv(65536):
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


def query(port: int, request: str) -> tuple[str, str | None]:
    """A one-shot host query: status and, on OKAY, the length-prefixed answer."""
    client = RawAdb(port)
    try:
        client.send(request)
        word, message = client.status()
        return (word, client.block()) if word == "OKAY" else (word, message)
    finally:
        client.close()


def open_device(port: int, serial: str) -> RawAdb:
    client = RawAdb(port)
    client.send(f"host:transport:{serial}")
    assert client.status() == ("OKAY", None)
    return client


def shell_v2_packets(client: RawAdb) -> list[tuple[int, bytes]]:
    packets = []
    while True:
        packet_id, length = struct.unpack("<BI", client.read(5))
        packets.append((packet_id, client.read(length)))
        if packet_id == 3:
            return packets


def test_host_version_is_hex_41(fake_adb: FakeAdbServer) -> None:
    assert query(fake_adb.port, "host:version") == ("OKAY", "0029")


def test_devices_lists_serials_and_long_form_has_transport_ids(fake_adb: FakeAdbServer) -> None:
    assert query(fake_adb.port, "host:devices") == ("OKAY", "emulator-5554\tdevice\nemulator-5556\tdevice\n")
    _, listing = query(fake_adb.port, "host:devices-l")
    assert listing is not None
    first, second = listing.splitlines()
    assert first.split()[:2] == ["emulator-5554", "device"] and first.endswith("transport_id:1")
    assert second.endswith("transport_id:2")


def test_tport_answers_with_the_8_byte_transport_id_then_serves_the_device(fake_adb: FakeAdbServer) -> None:
    client = RawAdb(fake_adb.port)
    client.send("host:tport:serial:emulator-5556")
    assert client.status() == ("OKAY", None)
    assert struct.unpack("<Q", client.read(8))[0] == 2
    client.send("shell:getprop ro.serialno")
    assert client.status() == ("OKAY", None)
    assert client.read_all() == b"emulator-5556\n"
    client.close()


@pytest.mark.parametrize(
    ("request_text", "message"),
    [
        ("host:transport:emulator-9999", "device 'emulator-9999' not found"),
        ("host:tport:serial:nope", "device 'nope' not found"),
        ("host:transport-any", "more than one device/emulator"),
        ("host:transport-usb", "no devices found"),  # adb: -d finds no USB device
        ("host:transport-id:7", "no device with transport id '7'"),
    ],
)
def test_transport_selection_failures_name_the_problem(
    fake_adb: FakeAdbServer, request_text: str, message: str
) -> None:
    client = RawAdb(fake_adb.port)
    client.send(request_text)
    assert client.status() == ("FAIL", message)
    client.close()


def test_transport_any_and_host_features_with_a_single_device(
    start_fake_adb: Callable[..., FakeAdbServer],
) -> None:
    server = start_fake_adb(devices=1)
    word, features = query(server.port, "host:features")
    assert word == "OKAY" and features is not None and "shell_v2" in features.split(",")
    assert query(server.port, "host-serial:emulator-5554:get-state") == ("OKAY", "device")
    assert query(server.port, "host-transport-id:1:get-serialno") == ("OKAY", "emulator-5554")
    client = RawAdb(server.port)
    client.send("host:tport:any")
    assert client.status() == ("OKAY", None)
    assert struct.unpack("<Q", client.read(8))[0] == 1
    client.close()


def test_shell_v1_is_a_raw_stream_that_ends_when_the_command_does(fake_adb: FakeAdbServer) -> None:
    client = open_device(fake_adb.port, "emulator-5554")
    client.send("shell:echo one; nosuchcmd; echo two")
    assert client.status() == ("OKAY", None)
    assert client.read_all() == b"one\n/system/bin/sh: nosuchcmd: inaccessible or not found\ntwo\n"
    client.close()


def test_shell_v2_separates_stdout_stderr_and_reports_the_exit_code(fake_adb: FakeAdbServer) -> None:
    client = open_device(fake_adb.port, "emulator-5554")
    client.send("shell,v2,raw:echo out; cat /no/such/file")
    assert client.status() == ("OKAY", None)
    packets = shell_v2_packets(client)
    assert packets == [(1, b"out\n"), (2, b"cat: /no/such/file: No such file or directory\n"), (3, b"\x01")]
    client.close()


def test_exec_streams_binary_png_unmodified(fake_adb: FakeAdbServer) -> None:
    client = open_device(fake_adb.port, "emulator-5554")
    client.send("exec:screencap -p")
    assert client.status() == ("OKAY", None)
    png = client.read_all()
    client.close()
    phone = fake_adb.device("emulator-5554").phone
    assert png == phone.screenshot_png() and png.startswith(b"\x89PNG\r\n\x1a\n")


def test_unknown_device_service_and_empty_exec_fail_clearly(fake_adb: FakeAdbServer) -> None:
    for request, expected in (("reboot:", "not supported"), ("exec:", "give a command")):
        client = open_device(fake_adb.port, "emulator-5554")
        client.send(request)
        word, message = client.status()
        assert word == "FAIL" and message is not None and expected in message
        client.close()


def _sync_request(client: RawAdb, request_id: bytes, payload: bytes) -> None:
    client.sock.sendall(request_id + struct.pack("<I", len(payload)) + payload)


def test_sync_stat_list_and_recv_of_a_ui_dump(fake_adb: FakeAdbServer) -> None:
    device = fake_adb.device("emulator-5554")
    with device.lock:
        expected_xml = device.phone.ui_xml().encode()
        device.files.write("/sdcard/window_dump.xml", expected_xml, mtime=1_700_000_000)
    client = open_device(fake_adb.port, "emulator-5554")
    client.send("sync:")
    assert client.status() == ("OKAY", None)

    _sync_request(client, b"STAT", b"/sdcard/window_dump.xml")
    word, mode, size, mtime = struct.unpack("<4sIII", client.read(16))
    assert (word, mode & 0o170000, size, mtime) == (b"STAT", 0o100000, len(expected_xml), 1_700_000_000)

    _sync_request(client, b"STA2", b"/sdcard/missing.xml")
    fields = struct.unpack("<4sIQQIIIIQqqq", client.read(72))
    assert fields[0] == b"STA2" and fields[1] == 2  # ENOENT

    _sync_request(client, b"LIST", b"/sdcard")
    names = []
    while True:
        word, _mode, _size, _mtime, name_length = struct.unpack("<4sIIII", client.read(20))
        if word == b"DONE":
            break
        names.append(client.read(name_length).decode())
    assert "window_dump.xml" in names

    _sync_request(client, b"RECV", b"/sdcard/window_dump.xml")
    received = b""
    while True:
        word, length = struct.unpack("<4sI", client.read(8))
        if word == b"DONE":
            break
        assert word == b"DATA"
        received += client.read(length)
    assert received == expected_xml

    _sync_request(client, b"RECV", b"/sdcard/nothing-here")
    word, length = struct.unpack("<4sI", client.read(8))
    assert word == b"FAIL" and b"does not exist" in client.read(length)
    client.sock.sendall(b"QUIT" + struct.pack("<I", 0))
    assert client.read_all() == b""
    client.close()


def test_sync_send_then_recv_round_trips_a_file_in_64k_chunks(fake_adb: FakeAdbServer) -> None:
    payload = bytes(range(256)) * 1000  # 256 kB: several DATA chunks each way
    client = open_device(fake_adb.port, "emulator-5554")
    client.send("sync:")
    assert client.status() == ("OKAY", None)
    _sync_request(client, b"SEND", b"/data/local/tmp/blob.bin,33188")
    for start in range(0, len(payload), 65536):
        chunk = payload[start : start + 65536]
        client.sock.sendall(b"DATA" + struct.pack("<I", len(chunk)) + chunk)
    client.sock.sendall(b"DONE" + struct.pack("<I", 1_600_000_000))
    assert client.read(8) == b"OKAY\x00\x00\x00\x00"

    _sync_request(client, b"RECV", b"/data/local/tmp/blob.bin")
    chunks = []
    while True:
        word, length = struct.unpack("<4sI", client.read(8))
        if word == b"DONE":
            break
        assert length <= 65536
        chunks.append(client.read(length))
    client.close()
    assert b"".join(chunks) == payload and len(chunks) == 4


def test_offline_device_is_listed_as_offline_and_refuses_transport(
    start_fake_adb: Callable[..., FakeAdbServer],
) -> None:
    server = start_fake_adb(devices=2, faults=FaultConfig(offline_prob=1.0, offline_duration_s=30.0))
    client = open_device(server.port, "emulator-5554")
    client.send("shell,v2:input tap 10 10")  # the first input action takes the device down
    assert client.status() == ("OKAY", None)
    assert client.read_all() == b""  # no exit packet: the transport vanished mid-command
    client.close()
    assert query(server.port, "host:devices")[1] == "emulator-5554\toffline\nemulator-5556\tdevice\n"
    client = RawAdb(server.port)
    client.send("host:transport:emulator-5554")
    word, message = client.status()
    assert word == "FAIL" and message is not None and message.startswith("device offline")
    client.close()


def test_many_concurrent_clients_each_get_their_own_answer(fake_adb: FakeAdbServer) -> None:
    errors: list[BaseException] = []

    def worker(number: int) -> None:
        try:
            for repeat in range(5):
                client = open_device(fake_adb.port, "emulator-5554" if number % 2 else "emulator-5556")
                client.send(f"shell:echo {number}-{repeat}")
                assert client.status() == ("OKAY", None)
                assert client.read_all() == f"{number}-{repeat}\n".encode()
                client.close()
        except BaseException as error:  # re-raised in the main thread below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors, errors[:3]


def test_stop_closes_the_port_and_open_connections_and_joins_threads(
    start_fake_adb: Callable[..., FakeAdbServer],
) -> None:
    before = {thread.ident for thread in threading.enumerate()}
    server = start_fake_adb(devices=1)
    port = server.port
    idle = RawAdb(port)  # an open connection that never sends a request
    sleeper = open_device(port, "emulator-5554")
    sleeper.send("shell:sleep 50")
    assert sleeper.status() == ("OKAY", None)
    server.stop()
    assert idle.read_all() == b"" and sleeper.read_all() == b""
    idle.close()
    sleeper.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1)
    leftovers = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    assert leftovers == []


def test_host_kill_stops_the_server(start_fake_adb: Callable[..., FakeAdbServer]) -> None:
    server = start_fake_adb(devices=1)
    client = RawAdb(server.port)
    client.send("host:kill")
    assert client.status() == ("OKAY", None)
    client.close()
    assert server.wait_stopped(timeout=10)


def test_load_task_command_sets_up_the_task_start_state(fake_adb: FakeAdbServer) -> None:
    task = next(
        t for t in (get_task(f"general-train-{i:04d}") for i in range(200)) if t.kind == "toggle_setting"
    )
    namespace, key, value = task.params["setup"]["settings"][0]
    client = open_device(fake_adb.port, "emulator-5556")
    client.send(f"shell:simdroid load-task {task.task_id} && settings get {namespace} {key}")
    assert client.status() == ("OKAY", None)
    assert client.read_all() == f"loaded {task.task_id}\n{value}\n".encode()
    client.close()
