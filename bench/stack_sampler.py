"""A sampling profiler for the threads of one process: where its collectors spend their wall-clock.

Every `interval_s` it takes every other thread's Python stack (`sys._current_frames`) and counts,
per function (`file:function`), in how many samples it was on a stack (inclusive) and on top
(exclusive). A collector thread waiting on its emulator sits in the simulated latency's sleep; one
acting, writing a shard or talking to Prefect shows those functions; one waiting for the GIL shows
the function it is in, so inclusive shares are shares of wall-clock, not of CPU.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from types import FrameType


def collectors_or_others(thread_name: str, stack: set[str]) -> str | None:
    """The default grouping: threads named ``collector-*`` apart from the rest."""
    return "collectors" if thread_name.startswith("collector-") else "others"


class StackSampler:
    """Samples the stacks of every thread and counts them per group: ``group_of(thread name, the
    functions on its stack)`` names a sample's group, or None to leave it out (by default the
    collectors, ``collector-*``, apart from the others: Prefect's event loops, shard timers)."""

    def __init__(
        self,
        interval_s: float = 0.02,
        group_of: Callable[[str, set[str]], str | None] = collectors_or_others,
        tags: dict[str, str] | None = None,
    ) -> None:
        self.interval_s = interval_s
        self.group_of = group_of
        # tag -> a prefix of `file:function` keys: the share of a group's samples with any such
        # frame on the stack (e.g. "mlflow/": time inside MLflow, whichever of its functions).
        self.tags = tags or {}
        self.tagged: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self.inclusive: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self.exclusive: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self.samples: Counter[str] = Counter()
        # CPU seconds of each (group, thread) when first sampled in it, and when last sampled
        self._cpu_first: dict[tuple[str, int], float] = {}
        self._cpu_last: dict[tuple[str, int], float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stack-sampler", daemon=True)

    def start(self) -> StackSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        for key in self._cpu_first:  # a last reading of the threads still alive
            seconds = thread_cpu_s(key[1])
            if seconds is not None:
                self._cpu_last[key] = seconds

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            threads = {t.ident: t for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                thread = threads.get(ident)
                name = thread.name if thread is not None else ""
                if name == "stack-sampler":
                    continue
                stack: set[str] = set()
                walk: FrameType | None = frame
                while walk is not None:
                    stack.add(_key(walk))
                    walk = walk.f_back
                group = self.group_of(name, stack)
                if group is None:
                    continue
                self.samples[group] += 1
                if thread is not None and thread.native_id is not None:
                    self._note_cpu(group, thread.native_id)
                self.exclusive[group][_key(frame)] += 1
                self.inclusive[group].update(stack)
                for tag, prefix in self.tags.items():
                    if any(key.startswith(prefix) for key in stack):
                        self.tagged[group][tag] += 1

    def _note_cpu(self, group: str, native_id: int) -> None:
        """Read a thread's CPU time when first seen in a group and about once a second after."""
        key = (group, native_id)
        if key in self._cpu_first and self.samples[group] % max(1, round(1 / self.interval_s)):
            return
        seconds = thread_cpu_s(native_id)
        if seconds is not None:
            self._cpu_first.setdefault(key, seconds)
            self._cpu_last[key] = seconds

    def cpu_s(self, group: str) -> float:
        """CPU seconds the group's threads used while sampled in it (read about once a second)."""
        return sum(self._cpu_last[k] - v for k, v in self._cpu_first.items() if k[0] == group)

    def summary(self, top: int = 40, groups: tuple[str, ...] = ("collectors", "others")) -> dict:
        """Per group: its thread samples, and the share of them each function was on the stack
        (inclusive) and on top (exclusive), the ``top`` most common."""
        out: dict = {"interval_s": self.interval_s}
        for group in groups:
            n = max(1, self.samples[group])
            out[group] = {
                "thread_samples": self.samples[group],
                "cpu_s": round(self.cpu_s(group), 2),
                "inclusive": {k: round(v / n, 4) for k, v in self.inclusive[group].most_common(top)},
                "exclusive": {k: round(v / n, 4) for k, v in self.exclusive[group].most_common(top)},
                "tagged": {tag: round(self.tagged[group][tag] / n, 4) for tag in self.tags},
            }
        return out


def thread_cpu_s(native_id: int) -> float | None:
    """User + system CPU seconds of one of this process's threads (Linux /proc), None elsewhere."""
    try:
        fields = Path(f"/proc/self/task/{native_id}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _key(frame: FrameType) -> str:
    return f"{_short(frame.f_code.co_filename)}:{frame.f_code.co_name}"


def _short(filename: str) -> str:
    for marker in ("site-packages/", "/lib/python3"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    parts = Path(filename).parts
    return "/".join(parts[-2:])
