"""Framing of the ADB host ("smart socket") protocol, as the adb server speaks it to its clients.

A request is four lowercase hex digits giving the payload length, then the payload (``000chost:version``).
The server answers ``OKAY`` or ``FAIL`` followed by a length-prefixed message; some services then send a
length-prefixed string, others switch the socket to a raw stream (shell, exec) or to the binary sync
protocol. Facts from AOSP ``adb/OVERVIEW.TXT`` and ``adb/SERVICES.TXT``.
"""

from __future__ import annotations

import socket

OKAY = b"OKAY"
FAIL = b"FAIL"
# Requests longer than this are refused: the real server caps them at MAX_PAYLOAD (1 MiB) too.
MAX_REQUEST_BYTES = 1024 * 1024


class ClientGone(ConnectionError):
    """The client closed the connection (or sent garbage) before a complete message arrived."""


def recv_exact(sock: socket.socket, size: int) -> bytes:
    """Read exactly ``size`` bytes or raise :class:`ClientGone`."""
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        try:
            chunk = sock.recv(min(remaining, 65536))
        except OSError as error:  # reset or closed under us by stop()
            raise ClientGone(str(error)) from error
        if not chunk:
            raise ClientGone(f"connection closed with {remaining} of {size} bytes unread")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_request(sock: socket.socket) -> str:
    """Read one length-prefixed request and return its payload as text."""
    header = recv_exact(sock, 4)
    # Exactly four hex digits: int() alone would also take "-001", "+0a1" or " 0a1".
    if not all(byte in b"0123456789abcdefABCDEF" for byte in header):
        raise ClientGone(f"bad request length header {header!r}")
    length = int(header, 16)
    if length > MAX_REQUEST_BYTES:
        raise ClientGone(f"request of {length} bytes is larger than {MAX_REQUEST_BYTES}")
    return recv_exact(sock, length).decode("utf-8", errors="replace")


def encode_block(payload: str | bytes) -> bytes:
    """A length-prefixed block: 4 hex digits, then the bytes."""
    data = payload.encode("utf-8") if isinstance(payload, str) else payload
    return f"{len(data):04x}".encode("ascii") + data


def send_okay(sock: socket.socket, payload: str | bytes | None = None) -> None:
    """``OKAY``, optionally followed by a length-prefixed block (as host queries answer)."""
    sock.sendall(OKAY if payload is None else OKAY + encode_block(payload))


def send_fail(sock: socket.socket, message: str) -> None:
    sock.sendall(FAIL + encode_block(message))


def close_gracefully(sock: socket.socket, drain_timeout_s: float = 2.0) -> None:
    """Half-close, drain what the client still sends, then close.

    Closing a socket with unread input makes the kernel send RST, and a client that has not yet read our
    last bytes then loses them (ECONNRESET). So: shut our side, read until the client closes its side.
    """
    try:
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(drain_timeout_s)
        while sock.recv(65536):
            pass
    except OSError:
        pass
    finally:
        sock.close()
