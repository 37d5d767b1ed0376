"""The ``sync:`` service: file transfer as ``adb pull``/``adb push`` and adbutils' ``Sync`` speak it.

After ``sync:`` is accepted the socket carries binary messages, all integers little-endian: a request is
a 4-letter id and a u32 length followed by that many bytes (a path, or data). Facts from AOSP
``adb/SYNC.TXT`` and ``file_sync_protocol.h``:

- ``STAT path`` -> ``STAT`` mode size mtime (u32 each; all zero when missing)
- ``STA2``/``LST2 path`` -> id, error (errno), dev u64, ino u64, mode, nlink, uid, gid (u32), size u64,
  atime/mtime/ctime i64
- ``LIST dir`` -> ``DENT`` mode size mtime namelen name ..., then ``DONE`` with a zeroed entry
- ``RECV path`` -> ``DATA`` len bytes (chunks of at most 64 KiB) ..., ``DONE`` 0; or ``FAIL`` len message
- ``SEND "path,mode"`` then the client sends ``DATA`` chunks and ``DONE`` mtime -> ``OKAY`` 0 or ``FAIL``
- ``QUIT`` ends the session.
"""

from __future__ import annotations

import errno
import socket
import struct
import zlib

from simulators.fake_adb.device import FakeDevice
from simulators.fake_adb.wire import ClientGone, recv_exact

MAX_CHUNK = 64 * 1024
_HEADER = struct.Struct("<4sI")
_STAT_V1 = struct.Struct("<4sIII")
_STAT_V2 = struct.Struct("<4sIQQIIIIQqqq")
_DENT = struct.Struct("<4sIIII")
# Paths in a sync request are capped (1024 bytes in adbd); more means a confused client.
_MAX_PATH = 1024


def serve_sync(sock: socket.socket, device: FakeDevice) -> None:
    """Answer sync requests until ``QUIT`` or the client closes."""
    while True:
        request_id, length = _HEADER.unpack(recv_exact(sock, _HEADER.size))
        if request_id == b"QUIT":
            return
        if length > _MAX_PATH:
            _send_fail(sock, f"path of {length} bytes is too long")
            return
        path = recv_exact(sock, length).decode("utf-8", errors="replace")
        if request_id == b"STAT":
            sock.sendall(_stat_v1(device, path))
        elif request_id in (b"STA2", b"LST2"):
            sock.sendall(_stat_v2(device, path, request_id))
        elif request_id == b"LIST":
            _list(sock, device, path)
        elif request_id == b"RECV":
            _recv(sock, device, path)
        elif request_id == b"SEND":
            _send(sock, device, path)
        else:
            _send_fail(sock, f"unknown sync request {request_id!r}")
            return


def _send_fail(sock: socket.socket, message: str) -> None:
    data = message.encode()
    sock.sendall(_HEADER.pack(b"FAIL", len(data)) + data)


def _stat_v1(device: FakeDevice, path: str) -> bytes:
    with device.lock:
        found = device.files.stat(path)
    mode, size, mtime = found if found else (0, 0, 0)
    return _STAT_V1.pack(b"STAT", mode, size & 0xFFFFFFFF, mtime)


def _stat_v2(device: FakeDevice, path: str, request_id: bytes) -> bytes:
    with device.lock:
        found = device.files.stat(path)
    if found is None:
        return _STAT_V2.pack(request_id, errno.ENOENT, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    mode, size, mtime = found
    inode = zlib.crc32(device.files.normalize(path).encode())
    # uid/gid 0 and 1015 are root and sdcard_rw, what files under /sdcard show on an emulator.
    return _STAT_V2.pack(request_id, 0, 0xFD00, inode, mode, 1, 0, 1015, size, mtime, mtime, mtime)


def _list(sock: socket.socket, device: FakeDevice, path: str) -> None:
    with device.lock:
        names = device.files.listdir(path) if device.files.is_dir(path) else []
        entries = [(name, device.files.stat(path.rstrip("/") + "/" + name)) for name in names]
    for name, found in entries:
        mode, size, mtime = found or (0, 0, 0)
        encoded = name.encode()
        sock.sendall(_DENT.pack(b"DENT", mode, size & 0xFFFFFFFF, mtime, len(encoded)) + encoded)
    sock.sendall(_DENT.pack(b"DONE", 0, 0, 0, 0))


def _recv(sock: socket.socket, device: FakeDevice, path: str) -> None:
    try:
        with device.lock:
            data = device.files.read(path)
    except FileNotFoundError:
        _send_fail(sock, f"remote object '{path}' does not exist")
        return
    except IsADirectoryError:
        _send_fail(sock, f"remote object '{path}' is a directory")
        return
    for start in range(0, len(data), MAX_CHUNK):
        chunk = data[start : start + MAX_CHUNK]
        sock.sendall(_HEADER.pack(b"DATA", len(chunk)) + chunk)
    sock.sendall(_HEADER.pack(b"DONE", 0))


def _send(sock: socket.socket, device: FakeDevice, spec: str) -> None:
    path, _, mode_text = spec.rpartition(",")
    if not path:  # no ",mode" suffix
        path, mode_text = spec, "33188"
    try:
        mode = int(mode_text)
    except ValueError:
        mode = 0o644
    received = bytearray()
    mtime = 0
    while True:
        message_id, length = _HEADER.unpack(recv_exact(sock, _HEADER.size))
        if message_id == b"DATA":
            if length > MAX_CHUNK:
                _send_fail(sock, f"DATA chunk of {length} bytes exceeds {MAX_CHUNK}")
                raise ClientGone("oversized sync DATA chunk")
            received += recv_exact(sock, length)
        elif message_id == b"DONE":
            mtime = length  # DONE carries the modification time in its length field
            break
        else:
            _send_fail(sock, f"expected DATA or DONE during SEND, got {message_id!r}")
            raise ClientGone("protocol error during SEND")
    try:
        with device.lock:
            device.files.write(path, bytes(received), mode=mode, mtime=mtime or None)
    except IsADirectoryError:
        _send_fail(sock, f"cannot write '{path}': Is a directory")
        return
    sock.sendall(_HEADER.pack(b"OKAY", 0))
