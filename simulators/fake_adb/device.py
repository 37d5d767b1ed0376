"""One phone served by the fake ADB server: a SimDroid plus the bits of Android that ADB sees around it.

The simulator knows screens, apps and settings; ADB also needs a filesystem (``uiautomator dump`` writes
a file that ``adb pull`` or ``cat`` reads back), system properties, a transport id and named emulator
snapshots. :class:`FakeDevice` bundles them and serialises access, because a phone runs one command at
a time while the server handles many client connections in parallel.
"""

from __future__ import annotations

import copy
import random
import stat
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

MAX_LOG_LINES = 5000  # the log ring buffer's size; older lines drop off, as in logcat's buffers
LOG_PRIORITIES = "VDIWEFA"  # logcat's priority letters, verbose to assert
# Directories every Android device has; anything else becomes a directory once a file is written below it.
_BASE_DIRECTORIES = ("/", "/sdcard", "/data", "/data/local", "/data/local/tmp", "/storage", "/system")


class SimulatedPhone(Protocol):
    """The part of the SimDroid device API (``simulators.simdroid.device.SimDroid``) ADB reaches."""

    serial: str
    size: tuple[int, int]

    @property
    def online(self) -> bool: ...
    def check_online(self) -> None: ...
    def load_task(self, task: Any, seed: int | None = None) -> None: ...
    def tap(self, x: int, y: int) -> None: ...
    def long_press(self, x: int, y: int, duration_ms: int = 800) -> None: ...
    def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int = 300) -> None: ...
    def input_text(self, text: str) -> None: ...
    def keyevent(self, key: int | str) -> None: ...
    def start_app(self, package: str, activity: str | None = None) -> None: ...
    def force_stop(self, package: str) -> None: ...
    @property
    def shot_size(self) -> tuple[int, int]: ...
    def screenshot_png(self) -> bytes: ...
    def screenshot_pixels(self) -> np.ndarray[Any, Any] | None: ...
    def ui_xml(self) -> str: ...
    def current_activity(self) -> str: ...
    def settings_get(self, namespace: str, key: str) -> str | None: ...
    def settings_put(self, namespace: str, key: str, value: str) -> None: ...
    def snapshot(self) -> bytes: ...
    def restore(self, blob: bytes) -> None: ...
    def is_successful(self, task: Any) -> bool: ...


@dataclass
class FileEntry:
    data: bytes
    mode: int  # permission bits only; the type bits come from the entry kind
    mtime: int


@dataclass
class FakeFilesystem:
    """A flat map of absolute paths to files; directories exist implicitly above files, or
    explicitly (``mkdir``) in ``directories``."""

    files: dict[str, FileEntry] = field(default_factory=dict)
    directories: set[str] = field(default_factory=set)

    @staticmethod
    def normalize(path: str) -> str:
        parts = [part for part in path.split("/") if part not in ("", ".")]
        resolved: list[str] = []
        for part in parts:
            if part == "..":
                if resolved:
                    resolved.pop()
            else:
                resolved.append(part)
        return "/" + "/".join(resolved)

    def is_dir(self, path: str) -> bool:
        path = self.normalize(path)
        if path in _BASE_DIRECTORIES or path in self.directories:
            return True
        prefix = path.rstrip("/") + "/"
        return any(name.startswith(prefix) for name in (*self.files, *self.directories))

    def mkdir(self, path: str) -> None:
        self.directories.add(self.normalize(path))

    def write(self, path: str, data: bytes, mode: int = 0o660, mtime: int | None = None) -> None:
        path = self.normalize(path)
        if self.is_dir(path):
            raise IsADirectoryError(path)
        self.files[path] = FileEntry(data, mode & 0o7777, int(time.time()) if mtime is None else mtime)

    def append(self, path: str, data: bytes) -> None:
        existing = self.files.get(self.normalize(path))
        self.write(path, (existing.data if existing else b"") + data)

    def read(self, path: str) -> bytes:
        path = self.normalize(path)
        if path in self.files:
            return self.files[path].data
        if self.is_dir(path):
            raise IsADirectoryError(path)
        raise FileNotFoundError(path)

    def remove(self, path: str) -> None:
        path = self.normalize(path)
        if path not in self.files:
            raise IsADirectoryError(path) if self.is_dir(path) else FileNotFoundError(path)
        del self.files[path]

    def stat(self, path: str) -> tuple[int, int, int] | None:
        """(full st_mode, size, mtime) or None when nothing is there."""
        path = self.normalize(path)
        entry = self.files.get(path)
        if entry is not None:
            return stat.S_IFREG | entry.mode, len(entry.data), entry.mtime
        if self.is_dir(path):
            return stat.S_IFDIR | 0o771, 4096, 0
        return None

    def listdir(self, path: str) -> list[str]:
        path = self.normalize(path)
        if not self.is_dir(path):
            raise NotADirectoryError(path)
        prefix = "" if path == "/" else path
        children = {
            name[len(prefix) + 1 :].split("/", 1)[0] for name in self.files if name.startswith(prefix + "/")
        }
        children |= {
            base[len(prefix) + 1 :].split("/", 1)[0]
            for base in (*_BASE_DIRECTORIES, *self.directories)
            if base != path and base.startswith(prefix + "/")
        }
        return sorted(children)


def default_properties(serial: str, size: tuple[int, int]) -> dict[str, str]:
    """What ``getprop`` reports: an x86_64 Android 14 emulator image."""
    return {
        "ro.build.version.release": "14",
        "ro.build.version.sdk": "34",
        "ro.product.model": "sdk_gphone64_x86_64",
        "ro.product.name": "sdk_gphone64_x86_64",
        "ro.product.device": "emu64xa",
        "ro.product.manufacturer": "Google",
        "ro.product.cpu.abi": "x86_64",
        "ro.kernel.qemu": "1",
        "ro.serialno": serial,
        "sys.boot_completed": "1",
        "ro.sf.lcd_density": "420",
        "persist.sys.simdroid.screen": f"{size[0]}x{size[1]}",
    }


@dataclass(frozen=True)
class LogEntry:
    """One line of the device log; ``logcat -v <format>`` lays it out."""

    time: float
    priority: str
    tag: str
    message: str
    pid: int = 1000
    tid: int = 1000


@dataclass
class EmulatorSnapshot:
    """What ``avd snapshot save`` keeps: the simulator state and the filesystem."""

    device_state: bytes
    files: dict[str, FileEntry]


class FakeDevice:
    """A served phone. Hold :attr:`lock` while touching :attr:`phone` or :attr:`files`."""

    def __init__(self, phone: SimulatedPhone, transport_id: int, idle_error_prob: float = 0.0, seed: int = 0):
        if not 0.0 <= idle_error_prob <= 1.0:
            raise ValueError(f"idle_error_prob must be in [0, 1], got {idle_error_prob}")
        self.phone = phone
        self.serial = phone.serial
        self.transport_id = transport_id
        self.files = FakeFilesystem()
        self.properties = default_properties(phone.serial, phone.size)
        self.lock = threading.RLock()
        self.killed = False
        # Set when the server stops, so a long `sleep` on the device ends and the server can join its thread.
        self.stopping = threading.Event()
        self.snapshots: dict[str, EmulatorSnapshot] = {}
        # `adb reverse` listeners (device-side remote -> host-side local) and the logcat buffer.
        self.reverses: dict[str, str] = {}
        self.log_entries: list[LogEntry] = []
        self.log_count = 0  # lines ever logged: a streaming logcat's position survives trimming and -c
        # Notified on every new log line, so a streaming `logcat` wakes up (uses `lock`).
        self.log_written = threading.Condition(self.lock)
        self.idle_error_prob = idle_error_prob
        # A separate stream from the simulator's, so enabling this fault leaves SimDroid's draws unchanged.
        self._idle_rng = random.Random(f"{seed}:{phone.serial}:uiautomator")

    @property
    def state(self) -> str:
        """The word ``adb devices`` prints for it."""
        return "device" if self.phone.online else "offline"

    def log(self, tag: str, message: str, priority: str = "I") -> None:
        """Append a line to the device's log buffer and wake streaming ``logcat`` readers."""
        with self.lock:
            self.log_entries.append(LogEntry(time.time(), priority, tag, message))
            self.log_count += 1
            del self.log_entries[:-MAX_LOG_LINES]
            self.log_written.notify_all()

    def log_since(self, position: int) -> tuple[list[LogEntry], int]:
        """The lines logged after ``position`` (a ``log_count``) that are still kept, and the new position."""
        with self.lock:
            first = self.log_count - len(self.log_entries)
            return self.log_entries[max(position - first, 0) :], self.log_count

    def draw_idle_state_error(self) -> bool:
        """Whether this ``uiautomator dump`` fails with "could not get idle state" (an animating screen)."""
        return self.idle_error_prob > 0 and self._idle_rng.random() < self.idle_error_prob

    def save_snapshot(self, name: str) -> None:
        with self.lock:
            self.snapshots[name] = EmulatorSnapshot(self.phone.snapshot(), copy.deepcopy(self.files.files))

    def load_snapshot(self, name: str) -> None:
        with self.lock:
            saved = self.snapshots.get(name)
            if saved is None:
                raise KeyError(name)
            self.phone.restore(saved.device_state)
            self.files.files = copy.deepcopy(saved.files)
