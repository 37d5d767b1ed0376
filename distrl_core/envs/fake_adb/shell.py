"""The fake device's ``/system/bin/sh``: runs a command line against a :class:`FakeDevice`.

Parsing lives in :mod:`shell_syntax`; the commands themselves in :mod:`commands_input` (touch, keys,
screen capture, UI dump) and :mod:`commands_system` (activities, settings, dumpsys, files, utilities).
Exceptions raised by the simulator because the device went offline propagate to the caller (the
server), which drops the connection the way a vanishing transport does.
"""

from __future__ import annotations

from collections.abc import Callable

from distrl_core.envs.fake_adb import commands_debug, commands_info, commands_input, commands_system
from distrl_core.envs.fake_adb.commands_system import ShellOutput
from distrl_core.envs.fake_adb.device import FakeDevice
from distrl_core.envs.fake_adb.shell_syntax import Pipeline, ShellSyntaxError, SimpleCommand, parse

__all__ = ["ShellOutput", "run_shell"]

CommandFunction = Callable[[FakeDevice, list[str], bytes], ShellOutput]

COMMANDS: dict[str, CommandFunction] = {
    **commands_input.COMMANDS,
    **commands_system.COMMANDS,
    **commands_debug.COMMANDS,
    **commands_info.COMMANDS,  # last: its dumpsys adds `dumpsys package` to commands_system's
}

# Commands that do not touch the phone, so a long `sleep` does not block other clients of the device.
_NO_DEVICE_LOCK = {"sleep", "echo", "true", "false", "grep"}


def run_shell(device: FakeDevice, line: str) -> ShellOutput:
    """Run ``line`` like ``sh -c line`` on the device; stdout and stderr are kept apart for shell v2."""
    try:
        pipelines = parse(line)
    except ShellSyntaxError as error:
        return ShellOutput(stderr=f"/system/bin/sh: {error}\n".encode(), exit_code=2)
    stdout, stderr, merged = bytearray(), bytearray(), bytearray()
    exit_code = 0
    for pipeline in pipelines:
        if (pipeline.run_if == "&&" and exit_code != 0) or (pipeline.run_if == "||" and exit_code == 0):
            continue
        first_word = pipeline.commands[0].words[0].expand(exit_code)
        if first_word == "exit" and len(pipeline.commands) == 1:
            return _exit(pipeline, exit_code, stdout, stderr, merged)
        result = _run_pipeline(device, pipeline, exit_code)
        stdout += result.stdout
        stderr += result.stderr
        merged += result.merged
        exit_code = result.exit_code
    return ShellOutput(bytes(stdout), bytes(stderr), exit_code, interleaved=bytes(merged))


def _exit(
    pipeline: Pipeline, exit_code: int, stdout: bytearray, stderr: bytearray, merged: bytearray
) -> ShellOutput:
    """``exit [n]`` ends the whole command line (the device's shell) with status n (default: the last)."""
    args = [word.expand(exit_code) for word in pipeline.commands[0].words[1:]]
    if args and args[0].lstrip("-").isdigit():
        exit_code = int(args[0]) & 0xFF
    return ShellOutput(bytes(stdout), bytes(stderr), exit_code, interleaved=bytes(merged))


def _run_pipeline(device: FakeDevice, pipeline: Pipeline, last_exit_code: int) -> ShellOutput:
    piped = b""
    stderr = bytearray()
    result = ShellOutput()
    for command in pipeline.commands:
        result = _run_command(device, command, piped, last_exit_code)
        piped = result.stdout
        stderr += result.stderr
    # Every stage's stderr reaches the terminal before the last stage's output is complete.
    return ShellOutput(piped, bytes(stderr), result.exit_code, interleaved=bytes(stderr) + piped)


def _run_command(
    device: FakeDevice, command: SimpleCommand, stdin: bytes, last_exit_code: int
) -> ShellOutput:
    argv = [word.expand(last_exit_code) for word in command.words]
    function = COMMANDS.get(argv[0])
    if function is None:
        result = ShellOutput(
            stderr=f"/system/bin/sh: {argv[0]}: inaccessible or not found\n".encode(), exit_code=127
        )
    elif argv[0] in _NO_DEVICE_LOCK:
        result = function(device, argv[1:], stdin)
    else:
        with device.lock:
            result = function(device, argv[1:], stdin)
    return _apply_redirects(device, command, result, last_exit_code)


def _apply_redirects(
    device: FakeDevice, command: SimpleCommand, result: ShellOutput, last_exit_code: int
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
            destinations[redirect.fd] = ("file", redirect.target.expand(last_exit_code), redirect.append)
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
