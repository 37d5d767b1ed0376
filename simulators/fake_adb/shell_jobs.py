"""The fake shell's state across one command line, and the builtins that use it.

A :class:`ShellSession` holds the variables (``$1``, ``$!``, ``PID`` ...), the background jobs started
with ``&`` and the client's terminal (for ``read``, and the stdin of a command like ``cat``). The
builtins here (``read``, ``kill``, ``wait``, ``sh``, ``export``) run without the device lock, because
they wait: on the client, on a job, or on a script.

Only a command that runs until stopped (``screenrecord``, see :data:`BACKGROUND`) becomes a real job in
a thread; any other command ended by ``&`` runs to completion at once and its status is kept for
``wait``, which no client of this server can tell apart (their output is not interleaved anyway).
"""

from __future__ import annotations

import itertools
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from simulators.fake_adb.commands_system import ShellOutput
from simulators.fake_adb.device import FakeDevice

# A job's function: runs until ``stop`` is set (by ``kill``), returns its output and status.
JobFunction = Callable[[FakeDevice, list[str], "JobControl"], ShellOutput]
BACKGROUND: dict[str, JobFunction] = {}  # filled by the modules that define such commands
_FIRST_PID = 4242
_SIGNALS = {name.removeprefix("SIG"): int(number) for name, number in signal.Signals.__members__.items()}


class Terminal(Protocol):
    def readline(self) -> bytes | None:
        """The next line the client types (with its newline), or None at end of input."""

    def read_all(self) -> bytes:
        """Everything the client types until it ends its input."""


@dataclass
class JobControl:
    """What ``kill`` sends a job: the signal number, and the event its loop waits on."""

    stop: threading.Event = field(default_factory=threading.Event)
    signal_number: int | None = None

    def send(self, number: int) -> None:
        self.signal_number = number
        self.stop.set()


@dataclass
class Job:
    control: JobControl
    thread: threading.Thread | None = None
    result: ShellOutput | None = None

    def finish(self) -> ShellOutput:
        if self.thread is not None:
            self.thread.join()
        assert self.result is not None
        return self.result


@dataclass
class ShellSession:
    variables: dict[str, str] = field(default_factory=lambda: {"?": "0", "$": "4200", "#": "0", "0": "sh"})
    terminal: Terminal | None = None
    jobs: dict[int, Job] = field(default_factory=dict)
    exited: bool = False  # `exit` or `exec` ended this shell: an interactive one reads no more lines
    _pids: itertools.count[int] = field(default_factory=lambda: itertools.count(_FIRST_PID))

    def start_job(self, device: FakeDevice, argv: list[str], run: Callable[[], ShellOutput]) -> None:
        """Start ``argv`` in the background (``run`` runs a command that finishes by itself)."""
        job = Job(JobControl())
        function = BACKGROUND.get(argv[0])
        if function is None:
            job.result = run()
        else:

            def body() -> None:
                job.result = function(device, argv[1:], job.control)

            job.thread = threading.Thread(target=body, name=f"fake-adb-{argv[0]}", daemon=True)
            job.thread.start()
        pid = next(self._pids)
        self.jobs[pid] = job
        self.variables["!"] = str(pid)


def read(device: FakeDevice, session: ShellSession, args: list[str], stdin: bytes) -> ShellOutput:
    """``read [-r] [NAME...]``: one line from stdin (a pipe, else the client's terminal) into variables."""
    names = [arg for arg in args if not arg.startswith("-")] or ["REPLY"]
    if stdin:
        line: bytes | None = stdin.split(b"\n", 1)[0] + (b"\n" if b"\n" in stdin else b"")
    else:
        line = session.terminal.readline() if session.terminal is not None else None
    if not line:
        for name in names:
            session.variables[name] = ""
        return ShellOutput(exit_code=1)
    fields = line.decode(errors="replace").rstrip("\n").split(maxsplit=len(names) - 1)
    for index, name in enumerate(names):
        session.variables[name] = fields[index] if index < len(fields) else ""
    return ShellOutput()


def kill(device: FakeDevice, session: ShellSession, args: list[str], stdin: bytes) -> ShellOutput:
    """``kill [-SIGNAL | -s SIGNAL] PID...``: signals the shell's own jobs (other pids: no such process)."""
    number, index = int(signal.SIGTERM), 0
    if args and args[0] == "-s" and len(args) > 1:
        name, index = args[1], 2
    elif args and args[0].startswith("-"):
        name, index = args[0][1:], 1
    else:
        name = ""
    if name:
        found = int(name) if name.isdigit() else _SIGNALS.get(name.upper().removeprefix("SIG"))
        if found is None:
            return ShellOutput(stderr=f"kill: unknown signal '{name}'\n".encode(), exit_code=1)
        number = found
    if index >= len(args):
        return ShellOutput(stderr=b"usage: kill [-s SIGNAL] PID...\n", exit_code=1)
    stderr, exit_code = bytearray(), 0
    for pid in args[index:]:
        job = session.jobs.get(int(pid)) if pid.isdigit() else None
        if job is None:
            stderr += f"kill: pid '{pid}': No such process\n".encode()
            exit_code = 1
        elif job.result is None:
            job.control.send(number)
    return ShellOutput(stderr=bytes(stderr), exit_code=exit_code)


def wait(device: FakeDevice, session: ShellSession, args: list[str], stdin: bytes) -> ShellOutput:
    """``wait [PID...]``: until the jobs end; their output joins the shell's, the status is the last's."""
    pids = [int(arg) for arg in args if arg.isdigit()] if args else sorted(session.jobs)
    stdout, stderr, exit_code = bytearray(), bytearray(), 0
    for pid in pids:
        job = session.jobs.pop(pid, None)
        if job is None:
            exit_code = 127
            continue
        result = job.finish()
        stdout += result.stdout
        stderr += result.stderr
        exit_code = result.exit_code
    return ShellOutput(bytes(stdout), bytes(stderr), exit_code if args else 0)


def sh(device: FakeDevice, session: ShellSession, args: list[str], stdin: bytes) -> ShellOutput:
    """``sh -c LINE [ARG0 ARG...]`` or ``sh FILE [ARG...]``: a child shell with its own variables."""
    from simulators.fake_adb.shell import run_shell  # the interpreter, which imports this module

    if not args:  # the script is stdin: a pipe, else what the client types
        line, positional = stdin.decode(errors="replace"), ["sh"]
    elif args[0] == "-c":
        if len(args) < 2:
            return ShellOutput(stderr=b"sh: -c: option requires an argument\n", exit_code=2)
        line, positional = args[1], args[2:] or ["sh"]
    else:
        with device.lock:
            try:
                line = device.files.read(args[0]).decode(errors="replace")
            except (FileNotFoundError, IsADirectoryError):
                return ShellOutput(
                    stderr=f"sh: {args[0]}: No such file or directory\n".encode(), exit_code=127
                )
        positional = args
    child = ShellSession(terminal=session.terminal)
    child.variables.update({str(index): value for index, value in enumerate(positional[:10])})
    child.variables["#"] = str(len(positional) - 1)
    return run_shell(device, line, child)


def export(device: FakeDevice, session: ShellSession, args: list[str], stdin: bytes) -> ShellOutput:
    """``export NAME=value``... sets variables (the fake has no environment apart from them);
    ``export NAME`` and ``export -p`` change nothing."""
    for arg in args:
        name, assigned, value = arg.partition("=")
        if assigned and name.isidentifier():
            session.variables[name] = value
        elif assigned or not (arg == "-p" or arg.isidentifier()):
            return ShellOutput(stderr=f"sh: export: {arg}: bad variable name\n".encode(), exit_code=1)
    return ShellOutput()


BUILTINS = {"read": read, "kill": kill, "wait": wait, "sh": sh, "export": export}
