"""An interactive ``adb shell``: the device's shell reading commands from the client, line by line.

A client asks for one with an empty command: ``shell,v2,TERM=xterm,pty:`` when its stdin is a
terminal, ``shell,v2,TERM=xterm,raw:`` when it is a pipe (``printf 'ls\\nexit\\n' | adb shell``),
``shell:`` over the old protocol (a pty). Each line runs as soon as it is complete and its output is
sent at once; variables persist from line to line. With a pty the shell prints a prompt
(``emu64xa:/ $ ``, the device name and the directory, as mksh on a device does) and the terminal
echoes what is typed (:mod:`terminal`); without one there is no prompt, as mksh reading a pipe
prints none, and stdout and stderr stay apart. The shell ends at ``exit [N]`` (status N), at an
``exec``'d command, or at the end of the client's input (the last command's status).
"""

from __future__ import annotations

import socket

from simulators.fake_adb.device import FakeDevice
from simulators.fake_adb.shell import ShellSession, run_shell
from simulators.fake_adb.terminal import ShellWriter, SocketTerminal
from simulators.simdroid.faults import DeviceOffline


def wants_pty(options: list[str], shell_v2: bool) -> bool:
    """Whether an interactive shell gets a pty: asked with ``pty``/``raw``; adbd's default is a pty."""
    return not (shell_v2 and "raw" in options)


def prompt(device: FakeDevice) -> bytes:
    return f"{device.properties.get('ro.product.device', 'android')}:/ $ ".encode()


def serve_interactive_shell(sock: socket.socket, device: FakeDevice, shell_v2: bool, pty: bool) -> None:
    """Run the client's lines until ``exit``, an ``exec``, or the end of its input."""
    writer = ShellWriter(sock, shell_v2, pty)
    terminal = SocketTerminal(sock, shell_v2, device.stopping, echo=writer.stdout if pty else None)
    session = ShellSession(terminal=terminal)
    exit_code = 0
    while not session.exited:
        if pty:
            writer.stdout(prompt(device))
        line = terminal.readline()
        if line is None:
            break
        try:
            result = run_shell(device, line.decode(errors="replace"), session)
        except DeviceOffline:
            sock.shutdown(socket.SHUT_RDWR)  # the transport vanished: no exit status
            return
        if pty:
            writer.stdout(result.merged)  # a terminal shows both streams as they were written
        else:
            writer.stdout(result.stdout)
            writer.stderr(result.stderr)
        exit_code = result.exit_code
    writer.exit(exit_code)
