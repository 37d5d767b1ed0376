"""The client's side of a shell connection: what it types (:class:`SocketTerminal`) and what it is
shown (:class:`ShellWriter`).

Shell v1 carries both directions as raw bytes; shell v2 (AOSP ``adb/shell_protocol.h``) as packets of
a one-byte id and a little-endian length: stdin (0), stdout (1), stderr (2), exit (3, one status
byte), close-stdin (4, from the client: end of input). With a pty (an interactive ``adb shell`` from
a terminal, whose own line editing the client turns off) the device's line discipline does the
terminal's work: it echoes what is typed, turns Enter (CR) into a newline, erases with Backspace,
drops the line on Ctrl-C, reads Ctrl-D at the start of a line as end of input, and shows each
output newline as CRLF.
"""

from __future__ import annotations

import select
import socket
import struct
import threading
from collections.abc import Callable

SHELL_STDIN, SHELL_STDOUT, SHELL_STDERR, SHELL_EXIT, SHELL_CLOSE_STDIN = 0, 1, 2, 3, 4
_PACKET = struct.Struct("<BI")
_POLL_S = 0.1
_ERASE = (b"\x7f", b"\x08")
_INTERRUPT, _END_OF_INPUT = b"\x03", b"\x04"


class ShellWriter:
    """Sends a shell's output to the client: v2 packets or raw bytes, CRLF line ends with a pty."""

    def __init__(self, sock: socket.socket, shell_v2: bool, pty: bool = False) -> None:
        self._sock, self._shell_v2, self._pty = sock, shell_v2, pty

    def stdout(self, data: bytes) -> None:
        self._send(SHELL_STDOUT, data)

    def stderr(self, data: bytes) -> None:
        # A terminal (pty) shows both streams as one; shell v1 has only one stream.
        self._send(SHELL_STDOUT if self._pty else SHELL_STDERR, data)

    def exit(self, exit_code: int) -> None:
        """The exit packet (shell v2); over v1 the client learns only that the stream ended."""
        if self._shell_v2:
            self._sock.sendall(_PACKET.pack(SHELL_EXIT, 1) + bytes([exit_code & 0xFF]))

    def _send(self, packet_id: int, data: bytes) -> None:
        if not data:
            return
        if self._pty:
            data = data.replace(b"\n", b"\r\n")  # the line discipline's onlcr
        self._sock.sendall(_PACKET.pack(packet_id, len(data)) + data if self._shell_v2 else data)


class SocketTerminal:
    """What the client types, line by line (``read``, an interactive shell) or all of it (``cat``).

    ``echo``: where a pty's line discipline echoes typed input (None: no pty, input is taken as is).
    Reading gives up when the server stops.
    """

    def __init__(
        self,
        sock: socket.socket,
        shell_v2: bool,
        stopping: threading.Event,
        echo: Callable[[bytes], None] | None = None,
    ) -> None:
        self._sock, self._shell_v2, self._stopping, self._echo = sock, shell_v2, stopping, echo
        self._buffer = bytearray()  # input ready to be read
        self._line = bytearray()  # with a pty: the line being typed, not yet ended by Enter
        self._raw = bytearray()  # v2 packet bytes not yet complete
        self._ended = False

    def readline(self) -> bytes | None:
        """The next line (with its newline), or None at end of input."""
        while b"\n" not in self._buffer and not self._ended:
            if not self._receive():
                return None
        end = self._buffer.find(b"\n") + 1 or len(self._buffer)
        line = bytes(self._buffer[:end])
        del self._buffer[:end]
        return line or None

    def read_all(self) -> bytes:
        """Everything the client types until it ends its input (a command's stdin)."""
        while not self._ended:
            if not self._receive():
                break
        data = bytes(self._buffer)
        self._buffer.clear()
        return data

    def _receive(self) -> bool:
        """Wait for more input; False when the server is stopping."""
        if self._stopping.is_set():
            return False
        readable, _, _ = select.select([self._sock], [], [], _POLL_S)
        if not readable:
            return True
        try:
            chunk = self._sock.recv(65536)
        except OSError:
            chunk = b""
        if not chunk:
            self._ended = True
        elif self._shell_v2:
            self._unpack(chunk)
        else:
            self._typed(chunk)
        return True

    def _unpack(self, chunk: bytes) -> None:
        self._raw += chunk
        while len(self._raw) >= _PACKET.size:
            packet_id, length = _PACKET.unpack_from(self._raw)
            if len(self._raw) < _PACKET.size + length:
                return
            payload = bytes(self._raw[_PACKET.size : _PACKET.size + length])
            del self._raw[: _PACKET.size + length]
            if packet_id == SHELL_STDIN:
                self._typed(payload)
            elif packet_id == SHELL_CLOSE_STDIN:
                self._ended = True
            # window-size changes (id 5) and anything else carry no input

    def _typed(self, data: bytes) -> None:
        if self._echo is None:
            self._buffer += data
            return
        for value in data:
            self._discipline(bytes([value]))

    def _discipline(self, char: bytes) -> None:
        assert self._echo is not None
        if char in (b"\r", b"\n"):
            self._echo(b"\n")
            self._buffer += self._line + b"\n"
            self._line.clear()
        elif char in _ERASE:
            if self._line:
                del self._line[-1]
                self._echo(b"\b \b")
        elif char == _INTERRUPT:
            self._echo(b"^C\n")
            self._line.clear()
            self._buffer += b"\n"  # an empty command: the shell prompts again
        elif char == _END_OF_INPUT:
            if not self._line:
                self._ended = True
        else:
            self._line += char
            self._echo(char)
