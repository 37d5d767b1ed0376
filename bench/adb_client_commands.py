"""Debian's ``adb`` client against ``distrl fake-adb``: which commands a person types by hand work.

Starts ``python -m ops.cli fake-adb`` from a checkout (``--root``, default this one) with a fresh
HOME (its console token goes there, where ``adb emu`` reads it), runs each command with the
installed ``adb -P PORT``, and checks its result: the exit status and what it printed or did.
Prints a markdown table (command, result, detail); ``--json PATH`` also writes the rows.

    python -m bench.adb_client_commands                      # this checkout
    python -m bench.adb_client_commands --root /path/to/old  # another checkout, for a before/after
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERIAL_PATTERN = re.compile(r"(emulator-\d+)")
Check = Callable[[subprocess.CompletedProcess[bytes]], bool]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Session:
    def __init__(self, adb: str, port: int, serial: str, home: Path) -> None:
        self.adb, self.port, self.serial, self.home = adb, port, serial, home

    def run(
        self, *args: str, stdin: bytes | None = None, typed: str | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        env = {
            **os.environ,
            "HOME": str(self.home),
            "ANDROID_ADB_SERVER_PORT": str(self.port),
            "TERM": "xterm",
        }
        env.pop("ANDROID_SERIAL", None)
        command: list[str] = [self.adb, "-P", str(self.port), "-s", self.serial, *args]
        if typed is not None:
            # On a terminal (`script` gives it one); typed after a second, once adb has set the
            # terminal raw (which discards what was typed before).
            adb = f"{self.adb} -P {self.port} -s {self.serial} {' '.join(args)}"
            command = ["bash", "-c", f"(sleep 1; printf {shlex.quote(typed)}) | script -qc '{adb}' /dev/null"]
        try:
            return subprocess.run(
                command, input=stdin or b"", capture_output=True, timeout=15, env=env, check=False
            )
        except subprocess.TimeoutExpired as expired:
            return subprocess.CompletedProcess(command, 124, expired.stdout or b"", expired.stderr or b"")


def echo_through_forward(session: Session) -> subprocess.CompletedProcess[bytes]:
    result = session.run("forward", "tcp:0", "tcp:7")
    port = result.stdout.decode().strip()
    if result.returncode != 0 or not port.isdigit():
        return result
    try:
        with socket.create_connection(("127.0.0.1", int(port)), timeout=5) as sock:
            sock.sendall(b"hello through a forward\n")
            sock.shutdown(socket.SHUT_WR)
            received = b""
            while chunk := sock.recv(4096):
                received += chunk
    except OSError as error:
        return subprocess.CompletedProcess([], 1, b"", str(error).encode())
    return subprocess.CompletedProcess([], 0, received, b"")


def follow_logcat(session: Session) -> subprocess.CompletedProcess[bytes]:
    # A following logcat never ends by itself: it works when a line logged meanwhile arrives.
    env = {**os.environ, "HOME": str(session.home), "ANDROID_ADB_SERVER_PORT": str(session.port)}
    process = subprocess.Popen(
        [session.adb, "-P", str(session.port), "-s", session.serial, "logcat", "-s", "Bench"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    time.sleep(1.0)
    session.run("shell", "log", "-t", "Bench", "line while following")
    time.sleep(1.5)
    process.kill()
    stdout, stderr = process.communicate()
    return subprocess.CompletedProcess([], 0 if b"line while following" in stdout else 1, stdout, stderr)


def commands(
    session: Session, scratch: Path
) -> list[tuple[str, Callable[[], subprocess.CompletedProcess[bytes]], Check]]:
    blob = scratch / "blob.bin"
    blob.write_bytes(bytes(range(256)) * 40)
    digest = hashlib.md5(blob.read_bytes()).hexdigest()
    ok = lambda result: result.returncode == 0  # noqa: E731
    return [
        (
            "adb devices -l",
            lambda: session.run("devices", "-l"),
            lambda r: ok(r) and session.serial.encode() in r.stdout,
        ),
        (
            "adb shell getprop ro.serialno",
            lambda: session.run("shell", "getprop", "ro.serialno"),
            lambda r: r.stdout.strip() == session.serial.encode(),
        ),
        ("adb push FILE /sdcard/blob.bin", lambda: session.run("push", str(blob), "/sdcard/blob.bin"), ok),
        (
            "adb pull /sdcard/blob.bin",
            lambda: session.run("pull", "/sdcard/blob.bin", str(scratch / "back.bin")),
            lambda r: ok(r) and (scratch / "back.bin").read_bytes() == blob.read_bytes(),
        ),
        (
            "adb exec-out screencap -p",
            lambda: session.run("exec-out", "screencap", "-p"),
            lambda r: r.stdout.startswith(b"\x89PNG"),
        ),
        ("adb reverse tcp:8000 tcp:9000", lambda: session.run("reverse", "tcp:8000", "tcp:9000"), ok),
        ("adb wait-for-device", lambda: session.run("wait-for-device"), ok),
        (
            "adb forward tcp:0 tcp:7",
            lambda: session.run("forward", "tcp:0", "tcp:7"),
            lambda r: ok(r) and r.stdout.strip().isdigit(),
        ),
        (
            "TCP echo through a forward",
            lambda: echo_through_forward(session),
            lambda r: r.stdout == b"hello through a forward\n",
        ),
        ("adb forward --list", lambda: session.run("forward", "--list"), lambda r: b"tcp:7" in r.stdout),
        ("adb logcat -d", lambda: session.run("logcat", "-d"), ok),
        ("adb logcat (follows)", lambda: follow_logcat(session), ok),
        (
            "echo x | adb shell cat",
            lambda: session.run("shell", "cat", stdin=b"x\n"),
            lambda r: r.stdout == b"x\n",
        ),
        (
            "printf 'echo hi\\nexit 3\\n' | adb shell",
            lambda: session.run("shell", stdin=b"echo hi\nexit 3\n"),
            lambda r: (r.returncode, r.stdout) == (3, b"hi\n"),
        ),
        (
            "adb shell (on a terminal)",
            lambda: session.run("shell", typed="echo hi\\rexit\\r"),
            # the prompt, the typed line echoed, its output
            lambda r: b":/ $ echo hi\r\n" in r.stdout and r.stdout.count(b"hi\r\n") == 2,
        ),
        (
            "adb emu avd name",
            lambda: session.run("emu", "avd", "name"),
            lambda r: r.stdout.split()[:1] == [session.serial.encode()],
        ),
        (
            "adb shell md5sum /sdcard/blob.bin",
            lambda: session.run("shell", "md5sum", "/sdcard/blob.bin"),
            lambda r: r.stdout.split()[:1] == [digest.encode()],
        ),
        (
            "adb shell 'export A=1; echo $A'",
            lambda: session.run("shell", "export A=1; echo $A"),
            lambda r: r.stdout == b"1\n",
        ),
    ]


def detail(result: subprocess.CompletedProcess[bytes], scratch: Path) -> str:
    """The exit status and the start of what it printed (stderr first), lines joined by " / "."""
    if result.stdout.startswith(b"\x89PNG"):
        return f"exit {result.returncode}: PNG, {len(result.stdout)} bytes"
    text = (
        (result.stderr.strip() or result.stdout.strip()).decode(errors="replace").replace(str(scratch), "TMP")
    )
    shown = " / ".join(line.strip() for line in text.splitlines() if line.strip())
    if len(shown) > 100:
        shown = shown[:97] + "..."
    return f"exit {result.returncode}" + (f": {shown}" if shown else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose `distrl fake-adb` to run")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    adb = shutil.which("adb")
    if adb is None:
        print("Debian's adb is not installed: apt-get install -y adb", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        port = free_port()
        env = {
            **os.environ,
            "HOME": str(scratch),
            "PYTHONPATH": str(args.root),
            "ADBUTILS_ADB_PATH": "/bin/false",
        }
        server = subprocess.Popen(
            [sys.executable, "-m", "ops.cli", "fake-adb", "--port", str(port), "--devices", "1"],
            cwd=args.root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            banner = server.stdout.readline()
            match = SERIAL_PATTERN.search(banner)
            if match is None:
                print(
                    f"fake-adb did not start: {banner}{server.stderr.read() if server.stderr else ''}",
                    file=sys.stderr,
                )
                return 1
            print(f"<!-- {banner.strip()} -->")
            session = Session(adb, port, match.group(1), scratch)
            rows = []
            for name, run, check in commands(session, scratch):
                result = run()
                rows.append(
                    {"command": name, "works": bool(check(result)), "detail": detail(result, scratch)}
                )
        finally:
            server.terminate()
            server.wait(timeout=30)
    print("| command | result | detail |\n|---|---|---|")
    for row in rows:
        cells = [f"`{row['command']}`", "works" if row["works"] else "**fails**", str(row["detail"])]
        print("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
