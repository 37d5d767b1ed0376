"""Shell commands a person debugging a device reaches for: ``pm list packages``, ``logcat``, ``pwd``,
``mkdir``, ``touch``, ``md5sum``. Minimal, with Android 14's (toybox's) messages; what they do not cover they
refuse the way the real command does. The caller holds the device lock.

``logcat`` prints the device's log buffer (activity starts, force-stops, ``log`` lines) in the
``-v`` format asked for (threadtime, time, brief, tag, process, raw). Here it dumps and returns, as
``-d`` does; a plain ``logcat`` sent as the whole command line streams instead (see
:mod:`simulators.fake_adb.streams`).
"""

from __future__ import annotations

import hashlib
import time

from simulators.fake_adb.commands_system import ShellOutput
from simulators.fake_adb.device import FakeDevice, LogEntry
from simulators.simdroid.catalog import APPS, LAUNCHER

LOGCAT_FORMATS = ("threadtime", "time", "brief", "tag", "process", "raw", "long")


def installed_packages() -> list[str]:
    return sorted({LAUNCHER, *(app.package for app in APPS), "android", "com.android.shell"})


def pm(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    if args[:2] in (["list", "packages"], ["list", "package"]):
        words = [arg for arg in args[2:] if not arg.startswith("-")]
        wanted = words[0] if words else ""
        lines = "".join(f"package:{name}\n" for name in installed_packages() if wanted in name)
        return ShellOutput(stdout=lines.encode())
    if args[:1] == ["path"] and len(args) > 1:
        if args[1] in installed_packages():
            return ShellOutput(stdout=f"package:/data/app/{args[1]}/base.apk\n".encode())
        return ShellOutput(exit_code=1)
    if not args:
        return ShellOutput(stderr=b"usage: pm [list|path] ...\n", exit_code=1)
    return ShellOutput(stderr=f"Unknown command: {args[0]}\n".encode(), exit_code=255)


def logcat(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    if "-c" in args or "--clear" in args:
        device.log_entries.clear()
        return ShellOutput()
    problem = logcat_problem(args)
    if problem:
        return ShellOutput(stderr=f"logcat: {problem}\n".encode(), exit_code=1)
    layout = logcat_format(args)
    return ShellOutput(stdout="".join(format_log(entry, layout) for entry in device.log_entries).encode())


def logcat_problem(args: list[str]) -> str | None:
    """What logcat would refuse in ``args`` (an unknown option or format), or None."""
    unknown = [a for a in args if a.startswith("-") and a not in ("-d", "-v", "-b", "-s", "-t", "-T")]
    if unknown:
        return f"unknown option -- {unknown[0].lstrip('-')}"
    if logcat_format(args) not in LOGCAT_FORMATS:
        return f"Invalid parameter '{logcat_format(args)}' to -v"
    return None


def logcat_format(args: list[str]) -> str:
    if "-v" in args and args.index("-v") + 1 < len(args):
        return args[args.index("-v") + 1]
    return "threadtime"


def format_log(entry: LogEntry, layout: str) -> str:
    """One log line as ``logcat -v <layout>`` prints it."""
    stamp = (
        time.strftime("%m-%d %H:%M:%S", time.localtime(entry.time)) + f".{int(entry.time * 1000) % 1000:03d}"
    )
    head = f"{entry.priority}/{entry.tag}"
    if layout == "time":
        return f"{stamp} {head}({entry.pid:5d}): {entry.message}\n"
    if layout == "brief":
        return f"{head}({entry.pid:5d}): {entry.message}\n"
    if layout == "tag":
        return f"{head}: {entry.message}\n"
    if layout == "process":
        return f"{entry.priority}({entry.pid:5d}) {entry.message}  ({entry.tag})\n"
    if layout == "raw":
        return f"{entry.message}\n"
    if layout == "long":
        return f"[ {stamp} {entry.pid:5d}:{entry.tid:5d} {head} ]\n{entry.message}\n\n"
    return f"{stamp} {entry.pid:5d} {entry.tid:5d} {entry.priority} {entry.tag}: {entry.message}\n"


def pwd(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    return ShellOutput(stdout=b"/\n")  # adb shell starts every command in /


def mkdir(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    parents = any(arg.startswith("-") and "p" in arg for arg in args)
    err = bytearray()
    for path in (arg for arg in args if not arg.startswith("-")):
        files, normalized = device.files, device.files.normalize(path)
        parent = normalized.rsplit("/", 1)[0] or "/"
        if files.stat(normalized) is not None:
            if not parents or not files.is_dir(normalized):
                err += f"mkdir: '{path}': File exists\n".encode()
        elif not parents and not files.is_dir(parent):
            err += f"mkdir: '{path}': No such file or directory\n".encode()
        else:
            files.mkdir(normalized)
    return ShellOutput(stderr=bytes(err), exit_code=1 if err else 0)


def touch(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    err = bytearray()
    for path in (arg for arg in args if not arg.startswith("-")):
        files, normalized = device.files, device.files.normalize(path)
        parent = normalized.rsplit("/", 1)[0] or "/"
        if files.is_dir(normalized):
            continue
        if not files.is_dir(parent):
            err += f"touch: '{path}': No such file or directory\n".encode()
            continue
        entry = files.files.get(normalized)
        files.write(normalized, entry.data if entry else b"", entry.mode if entry else 0o660)
    return ShellOutput(stderr=bytes(err), exit_code=1 if err else 0)


def md5sum(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    """``md5sum [-b] [FILE...]``: ``<hash>  <name>`` per file (``-`` or none: stdin); ``-b``: hash only."""
    brief = "-b" in args
    paths = [arg for arg in args if arg != "-b"] or ["-"]
    out, err = bytearray(), bytearray()
    for path in paths:
        try:
            data = stdin if path == "-" else device.files.read(path)
        except FileNotFoundError:
            err += f"md5sum: {path}: No such file or directory\n".encode()
            continue
        except IsADirectoryError:
            err += f"md5sum: {path}: Is a directory\n".encode()
            continue
        digest = hashlib.md5(data, usedforsecurity=False).hexdigest()
        out += (f"{digest}\n" if brief else f"{digest}  {path}\n").encode()
    return ShellOutput(bytes(out), bytes(err), 1 if err else 0)


COMMANDS = {"pm": pm, "logcat": logcat, "pwd": pwd, "mkdir": mkdir, "touch": touch, "md5sum": md5sum}
