"""A sampling profiler for the threads of one process: where its collectors spend their wall-clock.

Every `interval_s` it takes every other thread's Python stack (`sys._current_frames`) and counts,
per function (`file:function`), in how many samples it was on a stack (inclusive) and on top
(exclusive). A collector thread waiting on its emulator sits in the simulated latency's sleep; one
acting, writing a shard or talking to Prefect shows those functions; one waiting for the GIL shows
the function it is in, so inclusive shares are shares of wall-clock, not of CPU.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from pathlib import Path
from types import FrameType


class StackSampler:
    """Samples the stacks of the threads whose name starts with `prefix` (the collectors), and
    counts the other threads (Prefect's event loops, shard timers) apart."""

    def __init__(self, interval_s: float = 0.02, prefix: str = "collector-") -> None:
        self.interval_s = interval_s
        self.prefix = prefix
        self.inclusive: dict[str, Counter[str]] = {"collectors": Counter(), "others": Counter()}
        self.exclusive: dict[str, Counter[str]] = {"collectors": Counter(), "others": Counter()}
        self.samples: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stack-sampler", daemon=True)

    def start(self) -> StackSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                name = names.get(ident, "")
                if name == "stack-sampler":
                    continue
                group = "collectors" if name.startswith(self.prefix) else "others"
                self.samples[group] += 1
                seen: set[str] = set()
                self.exclusive[group][_key(frame)] += 1
                walk: FrameType | None = frame
                while walk is not None:
                    key = _key(walk)
                    if key not in seen:
                        seen.add(key)
                        self.inclusive[group][key] += 1
                    walk = walk.f_back

    def summary(self, top: int = 40) -> dict:
        out: dict = {"interval_s": self.interval_s}
        for group in ("collectors", "others"):
            n = max(1, self.samples[group])
            out[group] = {
                "thread_samples": self.samples[group],
                "inclusive": {k: round(v / n, 4) for k, v in self.inclusive[group].most_common(top)},
                "exclusive": {k: round(v / n, 4) for k, v in self.exclusive[group].most_common(top)},
            }
        return out


def _key(frame: FrameType) -> str:
    return f"{_short(frame.f_code.co_filename)}:{frame.f_code.co_name}"


def _short(filename: str) -> str:
    for marker in ("site-packages/", "/lib/python3"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    parts = Path(filename).parts
    return "/".join(parts[-2:])
