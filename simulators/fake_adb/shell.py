"""The fake device's ``/system/bin/sh``: runs a command line against a :class:`FakeDevice`.

Parsing lives in :mod:`shell_syntax`; the commands themselves in :mod:`commands_input` (touch, keys,
screen capture, UI dump) and :mod:`commands_system` (activities, settings, dumpsys, files, utilities).
Exceptions raised by the simulator because the device went offline propagate to the caller (the
server), which drops the connection the way a vanishing transport does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial

from simulators.fake_adb import (
    commands_debug,
    commands_info,
    commands_input,
    commands_record,
    commands_system,
)
from simulators.fake_adb.commands_system import ShellOutput
from simulators.fake_adb.device import FakeDevice
from simulators.fake_adb.shell_jobs import BUILTINS, ShellSession
from simulators.fake_adb.shell_syntax import Pipeline, ShellSyntaxError, SimpleCommand, parse

__all__ = ["ShellOutput", "ShellSession", "run_shell"]

CommandFunction = Callable[[FakeDevice, list[str], bytes], ShellOutput]

COMMANDS: dict[str, CommandFunction] = {
    **commands_input.COMMANDS,
    **commands_system.COMMANDS,
    **commands_debug.COMMANDS,
    **commands_info.COMMANDS,  # after commands_system: its dumpsys adds `dumpsys package`
    **commands_record.COMMANDS,
}
# What `which` finds: the commands, and the builtins that are binaries on a device too (not read/wait).
BINARIES = {*COMMANDS, "kill", "sh"}

# Commands that do not touch the phone, so a long `sleep` does not block other clients of the device;
# screenrecord takes the lock for each frame it captures.
_NO_DEVICE_LOCK = {"sleep", "echo", "true", "false", "grep", "screenrecord"}
# Commands that read stdin, and when, by their operands (not options): cat/md5sum with no file or
# "-", grep with a pattern and no file, sh with no script.
_READS_STDIN: dict[str, Callable[[list[str]], bool]] = {
    "cat": lambda operands: not operands or operands == ["-"],
    "md5sum": lambda operands: not operands or operands == ["-"],
    "grep": lambda operands: len(operands) == 1,
    "sh": lambda operands: not operands,
}
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def run_shell(device: FakeDevice, line: str, session: ShellSession | None = None) -> ShellOutput:
    """Run ``line`` like ``sh -c line`` on the device; stdout and stderr are kept apart for shell v2.

    ``session`` carries variables, jobs and the client's terminal (for ``read``); a fresh one by default.
    """
    session = session or ShellSession()
    try:
        pipelines = parse(line)
    except ShellSyntaxError as error:
        return ShellOutput(stderr=f"/system/bin/sh: {error}\n".encode(), exit_code=2)
    stdout, stderr, merged = bytearray(), bytearray(), bytearray()
    exit_code = int(session.variables.get("?", "0"))  # a line of an interactive shell sees the last status
    for pipeline in pipelines:
        if (pipeline.run_if == "&&" and exit_code != 0) or (pipeline.run_if == "||" and exit_code == 0):
            continue
        session.variables["?"] = str(exit_code)
        first_word = pipeline.commands[0].words[0].expand(session.variables)
        if first_word == "exit" and len(pipeline.commands) == 1:
            return _exit(pipeline, session, stdout, stderr, merged)
        if first_word == "exec" and len(pipeline.commands) == 1 and len(pipeline.commands[0].words) > 1:
            return _exec(device, pipeline.commands[0], session, stdout, stderr, merged)
        if pipeline.background and len(pipeline.commands) == 1:
            argv = [word.expand(session.variables) for word in pipeline.commands[0].words]
            session.start_job(device, argv, partial(_run_command, device, pipeline.commands[0], b"", session))
            exit_code = 0
            continue
        result = _run_pipeline(device, pipeline, session)
        stdout += result.stdout
        stderr += result.stderr
        merged += result.merged
        exit_code = result.exit_code
    session.variables["?"] = str(exit_code)
    return ShellOutput(bytes(stdout), bytes(stderr), exit_code, interleaved=bytes(merged))


def _exit(
    pipeline: Pipeline, session: ShellSession, stdout: bytearray, stderr: bytearray, merged: bytearray
) -> ShellOutput:
    """``exit [n]`` ends the whole command line (the device's shell) with status n (default: the last)."""
    session.exited = True
    exit_code = int(session.variables["?"])
    args = [word.expand(session.variables) for word in pipeline.commands[0].words[1:]]
    if args and args[0].lstrip("-").isdigit():
        exit_code = int(args[0]) & 0xFF
    return ShellOutput(bytes(stdout), bytes(stderr), exit_code, interleaved=bytes(merged))


def _exec(
    device: FakeDevice,
    command: SimpleCommand,
    session: ShellSession,
    stdout: bytearray,
    stderr: bytearray,
    merged: bytearray,
) -> ShellOutput:
    """``exec COMMAND``: the command replaces the shell, so nothing after it runs (Debian's ``adb
    logcat`` sends ``export ANDROID_LOG_TAGS="''"; exec logcat``). ``exec`` alone changes nothing."""
    session.exited = True
    result = _run_command(device, SimpleCommand(command.words[1:], command.redirects), None, session)
    session.variables["?"] = str(result.exit_code)
    return ShellOutput(
        bytes(stdout + result.stdout),
        bytes(stderr + result.stderr),
        result.exit_code,
        interleaved=bytes(merged + result.merged),
    )


def _run_pipeline(device: FakeDevice, pipeline: Pipeline, session: ShellSession) -> ShellOutput:
    piped: bytes | None = None  # the first command's stdin is the client's
    stderr = bytearray()
    result = ShellOutput()
    for command in pipeline.commands:
        result = _run_command(device, command, piped, session)
        piped = result.stdout
        stderr += result.stderr
    # Every stage's stderr reaches the terminal before the last stage's output is complete.
    return ShellOutput(
        result.stdout, bytes(stderr), result.exit_code, interleaved=bytes(stderr) + result.stdout
    )


def _run_command(
    device: FakeDevice, command: SimpleCommand, stdin: bytes | None, session: ShellSession
) -> ShellOutput:
    """Run one command; ``stdin`` None: it reads the client's input (if it reads stdin at all)."""
    words = list(command.words)
    assignments: dict[str, str] = {}
    while words and _ASSIGNMENT.match(words[0].literal_prefix()):
        name, _, value = words.pop(0).expand(session.variables).partition("=")
        assignments[name] = value
    if not words:  # NAME=value sets a shell variable; before a command it only sets its environment
        session.variables.update(assignments)
        return _apply_redirects(device, command, ShellOutput(), session)
    argv = [word.expand(session.variables) for word in words]
    if stdin is None:
        stdin = _client_input(argv, session)
    function = COMMANDS.get(argv[0])
    builtin = BUILTINS.get(argv[0])
    if builtin is not None:
        result = builtin(device, session, argv[1:], stdin)
    elif function is None:
        result = ShellOutput(
            stderr=f"/system/bin/sh: {argv[0]}: inaccessible or not found\n".encode(), exit_code=127
        )
    elif argv[0] in _NO_DEVICE_LOCK:
        result = function(device, argv[1:], stdin)
    else:
        with device.lock:
            result = function(device, argv[1:], stdin)
    return _apply_redirects(device, command, result, session)


def _client_input(argv: list[str], session: ShellSession) -> bytes:
    """What the client sends as stdin (``echo x | adb shell cat``), read only by a command that reads
    stdin given these arguments: waiting for input no one sends would hang every other command."""
    operands = [arg for arg in argv[1:] if not arg.startswith("-") or arg == "-"]
    reads = _READS_STDIN.get(argv[0])
    if reads is None or session.terminal is None or not reads(operands):
        return b""
    return session.terminal.read_all()


def _apply_redirects(
    device: FakeDevice, command: SimpleCommand, result: ShellOutput, session: ShellSession
) -> ShellOutput:
    # Like sh: each redirection, left to right, points a descriptor at a destination; then output flows.
    destinations: dict[int, tuple[str, str, bool]] = {
        1: ("stream", "stdout", False),
        2: ("stream", "stderr", False),
    }
    for redirect in command.redirects:
        if redirect.to_fd is not None:
            destinations[redirect.fd] = destinations[redirect.to_fd]
        else:
            assert redirect.target is not None
            destinations[redirect.fd] = ("file", redirect.target.expand(session.variables), redirect.append)
    streams = {"stdout": bytearray(), "stderr": bytearray()}
    truncated: set[str] = set()
    for fd, data in ((1, result.stdout), (2, result.stderr)):
        kind, where, append = destinations[fd]
        if kind == "stream":
            streams[where] += data
            continue
        if where == "/dev/null":
            continue
        try:
            with device.lock:
                if append or where in truncated:
                    device.files.append(where, data)
                else:
                    device.files.write(where, data)
                truncated.add(where)
        except IsADirectoryError:
            message = f"/system/bin/sh: can't create {where}: Is a directory\n".encode()
            return ShellOutput(bytes(streams["stdout"]), bytes(streams["stderr"]) + message, 1)
    return ShellOutput(bytes(streams["stdout"]), bytes(streams["stderr"]), result.exit_code)
