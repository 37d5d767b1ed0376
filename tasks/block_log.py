"""The learner's line per block of updates in its task run's log (tasks/learner.py `train_block`)."""

from __future__ import annotations

import time

from tasks.mlflow_metrics import run_logger


class BlockLog:
    """The block's line in the task run's log, as a collector logs each batch: the means over its
    updates of what shows whether learning is healthy (those its algorithm reports)."""

    SHOWN: tuple[tuple[str, str] | tuple[str, str, float], ...] = (
        ("actor_loss", "actor loss %.3f"),
        ("critic_loss", "critic loss %.3f"),
        ("entropy", "entropy %.2f"),
        ("rho_mean", "rho %.2f"),  # mean importance ratio pi/mu of the steps trained on
        ("rho_clipped_fraction", "rho > rho_max %.0f%%", 100.0),  # the share Retrace truncates
        ("policy_lag_mean", "policy lag %.1f"),
    )

    def __init__(self, first: int) -> None:
        self.first = first
        self.started = time.perf_counter()
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def add(self, metrics: dict[str, float]) -> None:
        for key, *_ in self.SHOWN:
            if key in metrics:
                self.sums[key] = self.sums.get(key, 0.0) + float(metrics[key])
                self.counts[key] = self.counts.get(key, 0) + 1

    def say(self, done: int, replay_steps: int) -> None:
        if not done:
            return
        seconds = time.perf_counter() - self.started
        parts = [
            fmt % (self.sums[key] / self.counts[key] * (scale[0] if scale else 1.0))
            for key, fmt, *scale in self.SHOWN
            if key in self.sums
        ]
        parts += [f"replay {replay_steps} steps", f"{done / max(seconds, 1e-9):.2f} updates/s"]
        # The same range as the task run's name (ASCII: the Prefect UI draws it).
        run_logger().info("updates %d-%d: %s", self.first, self.first + done - 1, ", ".join(parts))
