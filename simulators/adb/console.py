"""Client for the Android emulator console (``telnet localhost 5554``): auth and snapshots.

The console speaks lines ending in CRLF. It greets with a banner ending in ``OK``; when the banner says
"Authentication required", the client sends ``auth <token>`` with the token from
``~/.emulator_console_auth_token``. Each command's reply is zero or more lines, then ``OK`` (or
``OK: ...``) on success or ``KO: <message>`` on failure.
"""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path
from types import TracebackType

from simulators.adb.errors import ConsoleError

DEFAULT_TOKEN_PATH = Path.home() / ".emulator_console_auth_token"


def console_port_for_serial(serial: str) -> int | None:
    """``emulator-5554`` -> 5554: an emulator's serial names its console port."""
    prefix = "emulator-"
    if serial.startswith(prefix) and serial[len(prefix) :].isdigit():
        return int(serial[len(prefix) :])
    return None


class EmulatorConsole:
    """One console session. ``with EmulatorConsole(host, port) as console: console.snapshot_load("x")``."""

    def __init__(self, host: str, port: int, token_path: Path | None = None, timeout_s: float = 10.0):
        self.host = host
        self.port = port
        self.token_path = token_path or DEFAULT_TOKEN_PATH
        self.timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._buffer = b""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def connect(self) -> EmulatorConsole:
        try:
            self._sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
        except OSError as error:
            raise ConsoleError(
                f"cannot reach the emulator console at {self.address} ({error}); is the emulator running, "
                "and is its console port right (emulator-5554 listens on 5554)?"
            ) from error
        banner = self._read_reply()
        if any("Authentication required" in line for line in banner):
            self._authenticate()
        return self

    def _authenticate(self) -> None:
        try:
            token = self.token_path.read_text().strip()
        except OSError as error:
            raise ConsoleError(
                f"the emulator console at {self.address} requires auth but the token file {self.token_path} "
                f"cannot be read ({error}); point console_auth_token_path at the emulator's token file"
            ) from error
        self.command(f"auth {token}")

    def command(self, line: str) -> list[str]:
        """Send one command; return the reply lines before ``OK``. Raises :class:`ConsoleError` on ``KO``."""
        if self._sock is None:
            raise ConsoleError(f"console {self.address} is not connected: call connect() first")
        if "\n" in line or "\r" in line:
            raise ConsoleError(f"console commands are single lines, got {line!r}")
        try:
            self._sock.sendall(line.encode() + b"\r\n")
        except OSError as error:
            raise ConsoleError(
                f"lost the emulator console at {self.address} while sending {line!r}: {error}"
            ) from error
        return self._read_reply(command=line)

    def _read_reply(self, command: str = "<banner>") -> list[str]:
        lines: list[str] = []
        while True:
            line = self._read_line(command)
            if line == "OK" or line.startswith("OK:"):
                return lines
            if line.startswith("KO"):
                shown = "auth <token>" if command.startswith("auth ") else command
                raise ConsoleError(
                    f"emulator console {self.address} refused {shown!r}: {line[3:].strip() or line}"
                )
            lines.append(line)

    def _read_line(self, command: str) -> str:
        assert self._sock is not None
        while b"\n" not in self._buffer:
            try:
                chunk = self._sock.recv(4096)
            except TimeoutError as error:
                raise ConsoleError(
                    f"emulator console {self.address} did not answer {command!r} within {self.timeout_s}s"
                ) from error
            except OSError as error:
                raise ConsoleError(f"lost the emulator console at {self.address}: {error}") from error
            if not chunk:
                raise ConsoleError(
                    f"emulator console {self.address} closed the connection during {command!r}"
                )
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", errors="replace").rstrip("\r")

    def snapshot_save(self, name: str) -> None:
        self.command(f"avd snapshot save {name}")

    def snapshot_load(self, name: str) -> None:
        self.command(f"avd snapshot load {name}")

    def snapshot_list(self) -> list[str]:
        """Snapshot names (the TAG column of ``avd snapshot list``)."""
        names = []
        for line in self.command("avd snapshot list"):
            fields = line.split()
            if len(fields) >= 2 and not line.startswith(("List of", "ID ")):
                names.append(fields[1])
        return names

    def kill(self) -> None:
        self.command("kill")
        self.close()

    def close(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):  # the console may already have hung up (after kill)
                self._sock.sendall(b"quit\r\n")
            self._sock.close()
            self._sock = None

    def __enter__(self) -> EmulatorConsole:
        return self.connect()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
