"""A fake Android emulator console: the telnet-style text protocol an emulator serves on port 5554.

Like the real one it greets with a banner, requires ``auth <token>`` where the token is the content of
``~/.emulator_console_auth_token`` (created with a random token if missing; an empty file disables
auth), and answers each command with ``OK`` or ``KO: <message>``, lines ending in CRLF. Commands:
``auth``, ``help``, ``ping``, ``avd name``, ``avd status``, ``avd snapshot save|load|delete <name>``,
``avd snapshot list``, ``kill`` (the device leaves ``adb devices``), ``quit``/``exit``.
"""

from __future__ import annotations

import secrets
import socket
from pathlib import Path

from simulators.fake_adb.device import FakeDevice
from simulators.fake_adb.tcp import TcpService
from simulators.simdroid.faults import DeviceOffline

DEFAULT_AUTH_TOKEN_PATH = Path.home() / ".emulator_console_auth_token"
_MAX_LINE = 4096
_HELP = (
    "Android console commands:\r\n"
    "    help|h|?         print a list of commands\r\n"
    "    auth             user authentication for the emulator console\r\n"
    "    avd              control virtual device execution (name, status, snapshot save|load|delete|list)\r\n"
    "    ping             check if the emulator is alive\r\n"
    "    kill             kill the emulator instance\r\n"
    "    quit|exit        quit control session\r\n"
)


def read_or_create_token(path: Path) -> str:
    """The console auth token; like the emulator, write a fresh random one when the file is missing."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(12))
        path.chmod(0o600)
    return path.read_text().strip()


class FakeEmulatorConsole:
    """The console of one fake device, listening on its own port."""

    def __init__(
        self, device: FakeDevice, host: str, port: int, token_path: Path, idle_timeout_s: float | None = 600.0
    ):
        self.device = device
        self.token_path = token_path
        self._token = read_or_create_token(token_path)
        self._service = TcpService(
            host, port, self._handle, name=f"fake-console-{device.serial}", idle_timeout_s=idle_timeout_s
        )

    @property
    def port(self) -> int:
        return self._service.port

    def start(self) -> None:
        self._service.start()

    def stop(self) -> None:
        self._service.stop()

    def _handle(self, sock: socket.socket) -> None:
        reader = sock.makefile("rb")
        try:
            authenticated = not self._token
            sock.sendall(self._banner(authenticated).encode())
            for raw_line in reader:
                if len(raw_line) > _MAX_LINE:
                    sock.sendall(b"KO: command line too long\r\n")
                    return
                words = raw_line.decode("utf-8", errors="replace").split()
                if not words:
                    continue
                if words[0] in ("quit", "exit"):
                    return
                if words[0] == "auth":
                    # With auth off (an empty token file) any auth succeeds: adb sends the token
                    # from its user's home whenever that file is there.
                    authenticated = not self._token or (
                        len(words) == 2 and secrets.compare_digest(words[1], self._token)
                    )
                    reply = (
                        "Android Console: type 'help' for a list of commands\r\nOK\r\n"
                        if authenticated
                        else f"KO: authentication token does not match {self.token_path}\r\n"
                    )
                elif not authenticated and words[0] not in ("help", "h", "?"):
                    reply = f"KO: authentication required: send 'auth <token>' with the token in {self.token_path}\r\n"
                else:
                    reply = self._command(words)
                sock.sendall(reply.encode())
                if words[0] == "kill" and authenticated:
                    return
        finally:
            reader.close()
            sock.close()

    def _banner(self, authenticated: bool) -> str:
        if authenticated:
            return "Android Console: type 'help' for a list of commands\r\nOK\r\n"
        return (
            "Android Console: Authentication required\r\n"
            "Android Console: type 'auth <auth_token>' to authenticate\r\n"
            "Android Console: you can find your <auth_token> in \r\n"
            f"'{self.token_path}'\r\nOK\r\n"
        )

    def _command(self, words: list[str]) -> str:
        device = self.device
        if words[0] in ("help", "h", "?"):
            return _HELP + "OK\r\n"
        if words[0] == "ping":
            return "I am alive!\r\nOK\r\n"
        if words[0] == "kill":
            device.killed = True
            return "OK: killing emulator, bye bye\r\n"
        if words[0] != "avd" or len(words) < 2:
            return f"KO: unknown command '{' '.join(words)}', try 'help'\r\n"
        if words[1] == "name":
            return f"{device.serial}\r\nOK\r\n"
        if words[1] == "status":
            return "virtual device is running\r\nOK\r\n"
        if words[1] != "snapshot" or len(words) < 3:
            return f"KO: unknown avd command '{' '.join(words[1:])}'\r\n"
        return self._snapshot(words[2], words[3] if len(words) > 3 else None)

    def _snapshot(self, action: str, name: str | None) -> str:
        device = self.device
        if action == "list":
            with device.lock:
                names = sorted(device.snapshots)
            rows = "".join(f"{index:<9} {tag}\r\n" for index, tag in enumerate(names, start=1))
            return f"List of snapshots present on all disks:\r\nID        TAG\r\n{rows}OK\r\n"
        if action not in ("save", "load", "delete") or not name:
            return "KO: usage: avd snapshot save|load|delete <name> | avd snapshot list\r\n"
        try:
            if action == "save":
                device.save_snapshot(name)
            elif action == "load":
                device.load_snapshot(name)
            else:
                with device.lock:
                    del device.snapshots[name]
        except KeyError:
            return f"KO: snapshot '{name}' does not exist\r\n"
        except DeviceOffline:
            return f"KO: {device.serial} is offline, cannot {action} snapshot '{name}'\r\n"
        return "OK\r\n"
