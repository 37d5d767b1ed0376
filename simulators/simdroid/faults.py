"""Seeded latency and fault injection for SimDroid: what makes a fleet of emulators hard to run.

Each fault draws from its own RNG stream (derived from ``seed`` and the fault's name), so turning
one fault on or off does not change when the others happen.
"""

from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import dataclass

__all__ = ["DeviceOffline", "FaultConfig", "FaultModel", "ResetFailed"]


class DeviceOffline(RuntimeError):
    """The device stopped answering (fault model); calls fail until it comes back."""


class ResetFailed(RuntimeError):
    """Loading a task's start state failed (fault model); the device kept its previous state."""


LATENCY_KINDS = ("none", "emulator")
LATENCY_MODES = ("sleep", "virtual")


@dataclass
class FaultConfig:
    """Latency and faults, all off by default.

    - ``seed``: seeds every fault's RNG stream.
    - ``latency``: "none", or "emulator" for heavy-tailed step times: lognormal around
      ``latency_scale_s`` (shape ``latency_sigma``) and, with probability ``latency_tail_prob``, a
      Pareto(``latency_tail_alpha``) multiplier — the occasional multi-second hang of an emulator.
      Capped at ``latency_cap_factor`` x the median. Applies to input actions (tap, swipe, text,
      key, app start/stop).
    - ``latency_scale_s``: median latency in seconds (must be > 0 when latency is "emulator").
    - ``task_latency_sigma``: each episode (``new_episode``) scales that median by a lognormal
      factor of this shape, as heavy apps and slow pages do on an emulator (1.0 spans 100x between
      the 1st and 99th percentiles); 0 keeps it fixed.
    - ``latency_mode``: "sleep" really sleeps (for asynchronous-throughput benchmarks); "virtual"
      only adds to ``SimDroid.virtual_time_s`` (fast tests, simulated wall-clock).
    - ``drop_tap_prob``: a tap or long-press is silently lost.
    - ``offline_prob``: per input action or reset, the device goes offline for
      ``offline_duration_s`` seconds of real (monotonic) time; that call and every call until then
      raise DeviceOffline.
    - ``corrupt_screenshot_prob``: a screenshot comes back truncated, or as an all-white or
      all-black frame.
    - ``reset_fail_prob``: ``load_task`` raises ResetFailed and leaves the state unchanged.
    """

    seed: int = 0
    latency: str = "none"
    latency_scale_s: float = 0.0
    task_latency_sigma: float = 0.0
    latency_mode: str = "sleep"
    latency_sigma: float = 0.6
    latency_tail_prob: float = 0.05
    latency_tail_alpha: float = 1.5
    latency_cap_factor: float = 50.0
    drop_tap_prob: float = 0.0
    offline_prob: float = 0.0
    offline_duration_s: float = 2.0
    corrupt_screenshot_prob: float = 0.0
    reset_fail_prob: float = 0.0

    def __post_init__(self) -> None:
        if self.latency not in LATENCY_KINDS:
            raise ValueError(f"FaultConfig.latency must be one of {LATENCY_KINDS}, got {self.latency!r}")
        if self.latency_mode not in LATENCY_MODES:
            raise ValueError(
                f"FaultConfig.latency_mode must be one of {LATENCY_MODES}, got {self.latency_mode!r}"
            )
        if self.latency == "emulator" and not self.latency_scale_s > 0:
            raise ValueError(
                "FaultConfig.latency='emulator' needs latency_scale_s > 0 (the median step time)"
            )
        for name in (
            "drop_tap_prob",
            "offline_prob",
            "corrupt_screenshot_prob",
            "reset_fail_prob",
            "latency_tail_prob",
        ):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"FaultConfig.{name} is a probability in [0, 1], got {value}")
        if self.latency_scale_s < 0 or self.offline_duration_s < 0:
            raise ValueError("FaultConfig.latency_scale_s and offline_duration_s must be >= 0")
        if self.task_latency_sigma < 0:
            raise ValueError("FaultConfig.task_latency_sigma must be >= 0 (0: the same median every episode)")
        if self.latency_sigma < 0 or self.latency_tail_alpha <= 0 or self.latency_cap_factor < 1:
            raise ValueError(
                "FaultConfig needs latency_sigma >= 0, latency_tail_alpha > 0, latency_cap_factor >= 1"
            )


class FaultModel:
    def __init__(self, config: FaultConfig) -> None:
        self.config = config
        self._rngs = {
            name: random.Random(f"{config.seed}/{name}")
            for name in ("latency", "drop", "offline", "corrupt", "reset", "task-latency")
        }
        self.latency_scale_s = config.latency_scale_s  # this episode's median (see new_episode)
        self._offline_until = 0.0
        # Set by whoever owns the device (an embedded run's collector): a run that is stopping must
        # not wait out a simulated hang, which under the heavy tail can last minutes.
        self.interrupt: threading.Event | None = None
        self.counts = {"dropped_taps": 0, "offline_events": 0, "corrupt_screenshots": 0, "failed_resets": 0}

    # -- latency -----------------------------------------------------------------------------
    def new_episode(self) -> None:
        """Draw this episode's median latency (``task_latency_sigma``; its own RNG stream)."""
        cfg = self.config
        if cfg.task_latency_sigma > 0 and cfg.latency_scale_s > 0:
            factor = math.exp(self._rngs["task-latency"].gauss(0.0, cfg.task_latency_sigma))
            self.latency_scale_s = cfg.latency_scale_s * factor

    def sample_latency(self) -> float:
        cfg = self.config
        if cfg.latency == "none":
            return 0.0
        rng = self._rngs["latency"]
        value = self.latency_scale_s * math.exp(rng.gauss(0.0, cfg.latency_sigma))
        if rng.random() < cfg.latency_tail_prob:
            value *= rng.paretovariate(cfg.latency_tail_alpha)
        return min(value, self.latency_scale_s * cfg.latency_cap_factor)

    def apply_latency(self) -> float:
        seconds = self.sample_latency()
        if seconds > 0 and self.config.latency_mode == "sleep":
            if self.interrupt is None:
                time.sleep(seconds)
            else:
                self.interrupt.wait(seconds)
        return seconds

    # -- offline -----------------------------------------------------------------------------
    @property
    def online(self) -> bool:
        return time.monotonic() >= self._offline_until

    def offline_remaining_s(self) -> float:
        return max(0.0, self._offline_until - time.monotonic())

    def check_online(self, serial: str) -> None:
        if not self.online:
            raise DeviceOffline(f"device {serial} is offline for another {self.offline_remaining_s():.2f} s")

    def roll_offline(self, serial: str) -> None:
        """Maybe start an outage now; the call that triggers it fails too."""
        if self.config.offline_prob and self._rngs["offline"].random() < self.config.offline_prob:
            self._offline_until = time.monotonic() + self.config.offline_duration_s
            self.counts["offline_events"] += 1
            raise DeviceOffline(f"device {serial} went offline for {self.config.offline_duration_s:.2f} s")

    # -- other faults ------------------------------------------------------------------------
    def drop_tap(self) -> bool:
        if self.config.drop_tap_prob and self._rngs["drop"].random() < self.config.drop_tap_prob:
            self.counts["dropped_taps"] += 1
            return True
        return False

    def corruption(self) -> str | None:
        """None, or how to corrupt this screenshot: "truncated", "white" or "black"."""
        rng = self._rngs["corrupt"]
        if self.config.corrupt_screenshot_prob and rng.random() < self.config.corrupt_screenshot_prob:
            self.counts["corrupt_screenshots"] += 1
            return rng.choice(("truncated", "white", "black"))
        return None

    def reset_fails(self) -> bool:
        if self.config.reset_fail_prob and self._rngs["reset"].random() < self.config.reset_fail_prob:
            self.counts["failed_resets"] += 1
            return True
        return False
