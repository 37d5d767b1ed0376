"""Reverb-style sample-to-insert ratio limiter, counted in environment steps.

A learner much faster than its fleet would replay the same few trajectories until it over-fits
them. The limiter allows sampling while `sampled <= samples_per_insert * inserted + error_buffer`
and only once `min_size` steps have been inserted.
"""

from __future__ import annotations

from dataclasses import dataclass


class ReplayNotReady(RuntimeError):
    """Sampling is not allowed yet; `reason` says why and what would change it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class SampleToInsertRatio:
    samples_per_insert: float | None
    """Steps sampled per step inserted; None disables the limit."""
    min_size: int
    """Steps that must be in the replay before the first sample."""
    error_buffer: float
    """Slack, in sampled steps, before the ratio blocks sampling."""
    inserted: int = 0
    sampled: int = 0

    def __post_init__(self) -> None:
        if self.samples_per_insert is not None and self.samples_per_insert <= 0:
            raise ValueError("samples_per_insert must be > 0 (or None to disable the ratio limit)")
        if self.min_size < 0 or self.error_buffer < 0:
            raise ValueError("min_size and error_buffer must be >= 0")

    def check(self, size: int, steps: int) -> None:
        """Raise `ReplayNotReady` if sampling `steps` more steps from a replay of `size` steps is not allowed."""
        if size < self.min_size or size == 0:
            raise ReplayNotReady(
                f"replay holds {size} steps; sampling starts at min_size_steps={self.min_size}. "
                "Wait for collectors to write more shards (or lower min_size_steps)."
            )
        if self.samples_per_insert is None:
            return
        allowed = self.samples_per_insert * self.inserted + self.error_buffer
        if self.sampled + steps > allowed:
            raise ReplayNotReady(
                f"sample-to-insert ratio reached: {self.sampled} steps sampled for {self.inserted} inserted "
                f"(limit {self.samples_per_insert}/step + {self.error_buffer:g}). Ingest new shards, or raise "
                "samples_per_insert if the learner may reuse data more."
            )

    def record_sample(self, steps: int) -> None:
        self.sampled += steps

    def record_insert(self, steps: int) -> None:
        self.inserted += steps
