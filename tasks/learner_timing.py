"""Where a learner's wall-clock goes: the counters behind its duty cycle (benches and `distrl status`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class LearnerTiming:
    """Where a learner's wall-clock went since it opened (seconds; `started` and `first_update_at`
    on the monotonic clock)."""

    busy_s: float = 0.0  # inside updates: forward, backward, optimiser steps, priority write-back
    sample_s: float = 0.0  # waiting for a batch from the replay (not counted as busy)
    ingest_s: float = 0.0  # ingesting while the learner waits (not in the background)
    background_ingest_s: float = 0.0
    publish_s: float = 0.0  # publishing versions and checkpointing priorities
    started: float = field(default_factory=time.monotonic)
    first_update_at: float | None = None  # the replay reached its minimum size

    @property
    def duty_cycle(self) -> float:
        """Fraction of the wall-clock since the learner opened spent updating (warm-up included)."""
        return self.busy_s / max(1e-9, time.monotonic() - self.started)

    def report(self, updates: int) -> dict[str, float]:
        """The counters and duty cycles; `steady_duty_cycle` leaves out the replay's warm-up."""
        now = time.monotonic()
        first = self.first_update_at if self.first_update_at is not None else now
        return {
            "updates": float(updates),
            "wall_s": now - self.started,
            "busy_s": self.busy_s,
            "sample_s": self.sample_s,
            "ingest_s": self.ingest_s,
            "background_ingest_s": self.background_ingest_s,
            "publish_s": self.publish_s,
            "warmup_s": first - self.started,
            "duty_cycle": self.duty_cycle,
            "steady_duty_cycle": self.busy_s / max(1e-9, now - first),
        }
