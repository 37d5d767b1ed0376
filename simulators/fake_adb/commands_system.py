"""Shell commands about apps, settings, system state and files, answering like Android 14 does.

Each command takes the device, its arguments (without the command name) and stdin, and returns a
:class:`ShellOutput`. The caller holds the device lock. Fake-only: ``simdroid load-task <task_id> [episode_seed]``
puts the device into a SimDroid task's start state (what a real setup script or snapshot would do),
``simdroid is-successful <task_id>`` prints ``true``/``false`` from the simulator's own success check.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

from simulators.fake_adb.device import FakeDevice
from simulators.simdroid.faults import ResetFailed
from simulators.simdroid.tasks import get_task

# A `sleep` longer than this is cut short, so a stray command cannot pin a server thread for minutes.
MAX_SLEEP_S = 60.0
LAUNCHER_CATEGORY = "android.intent.category.LAUNCHER"
_SETTINGS_NAMESPACES = ("system", "secure", "global")


@dataclass
class ShellOutput:
    """What a command printed. ``merged`` is both streams in the order they were written, as a
    terminal (shell v1, ``exec:``) shows them; without it, stdout then stderr."""

    stdout: bytes = b""
    stderr: bytes = b""
    exit_code: int = 0
    interleaved: bytes | None = None

    @property
    def merged(self) -> bytes:
        return self.stdout + self.stderr if self.interleaved is None else self.interleaved


def _error(message: str, exit_code: int = 1) -> ShellOutput:
    return ShellOutput(stderr=(message.rstrip("\n") + "\n").encode(), exit_code=exit_code)


def _text(message: str) -> ShellOutput:
    return ShellOutput(stdout=message.encode())


def _split_component(component: str) -> tuple[str, str]:
    """``pkg/.Act`` -> (pkg, pkg.Act); ``pkg/full.Class`` -> (pkg, full.Class)."""
    package, _, activity = component.partition("/")
    return package, package + activity if activity.startswith(".") else activity


def _short_component(component: str) -> str:
    """``pkg/pkg.Act`` -> ``pkg/.Act``, as ActivityRecord prints it."""
    package, activity = _split_component(component)
    if activity.startswith(package + "."):
        return f"{package}/{activity[len(package) :]}"
    return f"{package}/{activity}"


def _window_token(component: str) -> str:
    # Stable per activity, hex like the identity hash Android prints.
    return f"{zlib.crc32(component.encode()):08x}"


# ---- activities ---------------------------------------------------------------------------------


def am(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    if not args:
        return _error("usage: am [start|force-stop] ...")
    subcommand, rest = args[0], args[1:]
    if subcommand == "force-stop" and rest:
        device.phone.force_stop(rest[-1])
        device.log("ActivityManager", f"Force stopping {rest[-1]} appid=10100 user=0: from pid 4242")
        return ShellOutput()
    if subcommand not in ("start", "start-activity"):
        return _error(f"Error: unknown command '{subcommand}' (the fake am knows start and force-stop)")
    component = None
    index = 0
    while index < len(rest):
        option = rest[index]
        if option == "-n" and index + 1 < len(rest):
            component = rest[index + 1]
            index += 2
        elif option in ("-W", "-S", "-R") or not option.startswith("-"):
            index += 1
        else:  # options with a value: -a ACTION, -c CATEGORY, -d URI, --user N, -f FLAGS, --es K V ...
            index += 3 if option in ("--es", "--ei", "--ez", "-e") else 2
    if component is None or "/" not in component:
        return _error("Error: the fake am start needs -n <package>/<activity>")
    package, _, activity = component.partition("/")
    try:
        device.phone.start_app(package, activity or None)
    except (LookupError, ValueError):
        message = f"Error type 3\nError: Activity class {{{component}}} does not exist."
        return ShellOutput(
            stdout=f"Starting: Intent {{ cmp={component} }}\n".encode(),
            stderr=f"{message}\n".encode(),
            exit_code=1,
        )
    device.log("ActivityTaskManager", f"START u0 {{cmp={component}}} from uid 2000")
    return _text(f"Starting: Intent {{ cmp={component} }}\n")


def monkey(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    package = args[args.index("-p") + 1] if "-p" in args and args.index("-p") + 1 < len(args) else None
    if package is None:
        return _error("** Error: the fake monkey needs -p <package>")
    try:
        device.phone.start_app(package, None)
    except (LookupError, ValueError):
        return ShellOutput(stdout=b"** No activities found to run, monkey aborted.\n", exit_code=252)
    return _text(
        f"  bash arg: -p\n  bash arg: {package}\nEvents injected: 1\n## Network stats: elapsed time=12ms\n"
    )


def dumpsys(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    service = args[0] if args else ""
    component = device.phone.current_activity()
    full = "{}/{}".format(*_split_component(component))
    token = _window_token(component)
    record = f"ActivityRecord{{{token} u0 {_short_component(component)} t12}}"
    if service == "window":
        return _text(
            "WINDOW MANAGER WINDOWS (dumpsys window windows)\n"
            f"  Window #0 Window{{{token} u0 {full}}}:\n"
            f"  mCurrentFocus=Window{{{token} u0 {full}}}\n"
            f"  mFocusedApp={record}\n"
        )
    if service == "activity":
        width, height = device.phone.size
        return _text(
            "ACTIVITY MANAGER ACTIVITIES (dumpsys activity activities)\n"
            "Display #0 (activities from top to bottom):\n"
            f"  * Task{{{token} #12 type=standard A=10123:{component.split('/')[0]}}}\n"
            f"      mBounds=Rect(0, 0 - {width}, {height})\n"
            f"    mResumedActivity: {record}\n"
            f"  ResumedActivity: {record}\n"
            f"  ACTIVITY {full} {token} pid=4242\n"
        )
    if service == "display":
        width, height = device.phone.size
        return _text(
            f"DISPLAY MANAGER (dumpsys display)\n  mBaseDisplayInfo=DisplayInfo{{real {width} x {height}, orientation=0}}\n"
        )
    if service == "power":
        return _text(
            "POWER MANAGER (dumpsys power)\n  mWakefulness=Awake\n  mHoldingDisplaySuspendBlocker=true\n"
        )
    return _error(f"Can't find service: {service} (the fake dumpsys knows window, activity, display, power)")


# ---- settings and system properties ---------------------------------------------------------------


def settings(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    args = _strip_user_option(args)
    if len(args) >= 3 and args[0] == "get" and args[1] in _SETTINGS_NAMESPACES:
        value = device.phone.settings_get(args[1], args[2])
        return _text(f"{'null' if value is None else value}\n")
    if len(args) >= 4 and args[0] == "put" and args[1] in _SETTINGS_NAMESPACES:
        device.phone.settings_put(args[1], args[2], args[3])
        return ShellOutput()
    return _error(
        "usage: settings [--user N] get|put {system|secure|global} KEY [VALUE]\nInvalid namespace or arguments",
        255,
    )


def _strip_user_option(args: list[str]) -> list[str]:
    if len(args) >= 2 and args[0] == "--user":
        return args[2:]
    if len(args) >= 3 and args[1] == "--user":
        return [args[0], *args[3:]]
    return args


def svc(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    """``svc wifi|data|bluetooth enable|disable``: the shell's switch for radios, backed by settings."""
    keys = {"wifi": "wifi_on", "data": "mobile_data", "bluetooth": "bluetooth_on"}
    if len(args) == 2 and args[0] in keys and args[1] in ("enable", "disable"):
        device.phone.settings_put("global", keys[args[0]], "1" if args[1] == "enable" else "0")
        return ShellOutput()
    return _error("usage: svc wifi|data|bluetooth enable|disable")


def wm(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    width, height = device.phone.size
    if args[:1] == ["size"]:
        return _text(f"Physical size: {width}x{height}\n")
    if args[:1] == ["density"]:
        return _text(f"Physical density: {device.properties['ro.sf.lcd_density']}\n")
    return _error("usage: wm size|density")


def getprop(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    if args:
        return _text(device.properties.get(args[0], args[1] if len(args) > 1 else "") + "\n")
    return _text("".join(f"[{key}]: [{value}]\n" for key, value in sorted(device.properties.items())))


def simdroid(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    usage = "usage: simdroid load-task <task_id> [episode_seed] | simdroid is-successful <task_id>"
    valid = (args[:1] == ["load-task"] and len(args) in (2, 3)) or (
        args[:1] == ["is-successful"] and len(args) == 2
    )
    if not valid or (len(args) == 3 and not args[2].lstrip("-").isdigit()):
        return _error(usage, 2)
    try:
        task = get_task(args[1])
    except KeyError:
        return _error(f"simdroid: unknown task '{args[1]}'")
    if args[0] == "is-successful":
        return _text("true\n" if device.phone.is_successful(task) else "false\n")
    try:
        device.phone.load_task(task, int(args[2]) if len(args) == 3 else None)
    except ResetFailed as error:
        return _error(f"simdroid: load-task {args[1]} failed: {error}")
    return _text(f"loaded {args[1]}\n")


# ---- files and utilities ---------------------------------------------------------------------------


def cat(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    if not args or args == ["-"]:
        return ShellOutput(stdout=stdin)
    out, err = bytearray(), bytearray()
    for path in args:
        try:
            out += device.files.read(path)
        except FileNotFoundError:
            err += f"cat: {path}: No such file or directory\n".encode()
        except IsADirectoryError:
            err += f"cat: {path}: Is a directory\n".encode()
    return ShellOutput(bytes(out), bytes(err), 1 if err else 0)


def rm(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    force = any(arg.startswith("-") and "f" in arg for arg in args)
    recursive = any(arg.startswith("-") and "r" in arg.lower() for arg in args)
    err = bytearray()
    for path in (arg for arg in args if not arg.startswith("-")):
        normalized = device.files.normalize(path)
        if recursive and device.files.is_dir(normalized):
            for name in [
                name for name in device.files.files if name.startswith(normalized.rstrip("/") + "/")
            ]:
                del device.files.files[name]
            continue
        try:
            device.files.remove(path)
        except FileNotFoundError:
            if not force:
                err += f"rm: {path}: No such file or directory\n".encode()
        except IsADirectoryError:
            err += f"rm: {path}: Is a directory\n".encode()
    return ShellOutput(stderr=bytes(err), exit_code=1 if err else 0)


def ls(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    paths = [arg for arg in args if not arg.startswith("-")] or ["/sdcard"]
    out, err = bytearray(), bytearray()
    for path in paths:
        if device.files.is_dir(path):
            out += "".join(f"{name}\n" for name in device.files.listdir(path)).encode()
        elif device.files.stat(path) is not None:
            out += f"{path}\n".encode()
        else:
            err += f"ls: {path}: No such file or directory\n".encode()
    return ShellOutput(bytes(out), bytes(err), 1 if err else 0)


def echo(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    if args[:1] == ["-n"]:
        return _text(" ".join(args[1:]))
    return _text(" ".join(args) + "\n")


def grep(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    flags = {arg for arg in args if arg.startswith("-")}
    patterns = [arg for arg in args if not arg.startswith("-")]
    if not patterns:
        return _error("usage: grep [-E] [-i] [-v] PATTERN", 2)
    try:
        regex = re.compile(patterns[0], re.IGNORECASE if "-i" in flags else 0)
    except re.error as error:
        return _error(f"grep: bad regex: {error}", 2)
    invert = "-v" in flags
    lines = [
        line for line in stdin.decode(errors="replace").splitlines() if bool(regex.search(line)) != invert
    ]
    return ShellOutput(stdout="".join(f"{line}\n" for line in lines).encode(), exit_code=0 if lines else 1)


def sleep(device: FakeDevice, args: list[str], stdin: bytes) -> ShellOutput:
    try:
        seconds = float(args[0]) if args else 0.0
    except ValueError:
        return _error(f"sleep: invalid number '{args[0]}'")
    device.stopping.wait(min(max(seconds, 0.0), MAX_SLEEP_S))
    return ShellOutput()


COMMANDS = {
    "am": am,
    "monkey": monkey,
    "dumpsys": dumpsys,
    "settings": settings,
    "svc": svc,
    "wm": wm,
    "getprop": getprop,
    "simdroid": simdroid,
    "cat": cat,
    "rm": rm,
    "ls": ls,
    "echo": echo,
    "grep": grep,
    "sleep": sleep,
    "true": lambda device, args, stdin: ShellOutput(),
    "false": lambda device, args, stdin: ShellOutput(exit_code=1),
}
