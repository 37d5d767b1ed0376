"""A live progress line for embedded runs, and the time series behind the learning-curve plot."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast
from uuid import UUID

from tasks.collector import CollectorSession
from tasks.learner import LearnerSession
from tasks.stop import StopToken

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sample:
    seconds: float
    episodes: int
    successes: int
    rolling_success: float
    policy_version: int
    replay_steps: int
    updates: int
    steps: int = 0
    # LearnerSession.timing() while the learner is open: its duty cycle before its session closes.
    learner_timing: dict[str, float] | None = None


class ProgressMonitor:
    """Polls the sessions open under a run's token every `period_s`; prints a rich progress bar when
    enabled."""

    def __init__(self, run: StopToken, enabled: bool = True, period_s: float = 1.0, window: int = 30) -> None:
        self.run = run
        self.enabled = enabled
        self.period_s = period_s
        self.history: list[Sample] = []
        self._recent: deque[tuple[int, int]] = deque(maxlen=window)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="progress", daemon=True)
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> ProgressMonitor:
        if self.enabled:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            progress = Progress(
                TextColumn("[bold]RL[/bold]"),
                BarColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
            )
            progress.start()
            self._task = progress.add_task("starting", total=None)
            self._progress = progress
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sample()
        if self._progress is not None:
            self._progress.stop()

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self.sample()

    def sample(self) -> Sample:
        collectors = self.run.open_sessions(CollectorSession)
        learners = self.run.open_sessions(LearnerSession)
        prev = self.history[-1] if self.history else Sample(0.0, 0, 0, 0.0, 0, 0, 0)
        # Sessions close at the end of a run: never let the totals fall back.
        episodes = max(sum(c.episodes for c in collectors), prev.episodes)
        successes = max(sum(c.successes for c in collectors), prev.successes)
        steps = max(sum(c.steps for c in collectors), prev.steps)
        self._recent.append((episodes, successes))
        first_e, first_s = self._recent[0]
        rolling = (successes - first_s) / (episodes - first_e) if episodes > first_e else prev.rolling_success
        learner = learners[0] if learners else None
        timing = learner.timing() if learner else None
        sample = Sample(
            seconds=time.monotonic() - self._started,
            episodes=episodes,
            successes=successes,
            rolling_success=rolling,
            policy_version=learner.version if learner else prev.policy_version,
            replay_steps=learner.replay.size_steps if learner else prev.replay_steps,
            updates=learner.learner.updates if learner else prev.updates,
            steps=steps,
            learner_timing=timing or prev.learner_timing,
        )
        self.history.append(sample)
        if self._progress is not None and self._task is not None:
            self._progress.update(
                self._task,
                description=(
                    f"episodes {sample.episodes:5d} | rolling success {sample.rolling_success:5.1%} | "
                    f"policy v{sample.policy_version} | replay {sample.replay_steps} steps | updates {sample.updates}"
                ),
            )
        return sample


class BoundedProgress:
    """A Prefect progress artifact for a run with a bound (episodes, updates or minutes); none otherwise.

    The bar follows the count bound when there is one, else the time bound; it is updated at most
    every `period_s` (each update is a request to the Prefect server).
    """

    def __init__(
        self, what: str, max_count: int | None, max_minutes: float | None, *, key: str, period_s: float = 10.0
    ) -> None:
        self.what, self.max_count, self.max_minutes = what, max_count, max_minutes
        self.period_s = period_s
        self.started = time.monotonic()
        self._last = 0.0
        self.artifact_id: UUID | None = None
        if max_count is None and max_minutes is None:
            return
        from prefect.artifacts import create_progress_artifact

        bound = f"{max_count} {'episodes' if what == 'collector' else 'updates'}" if max_count else ""
        bound = bound or f"{max_minutes:g} minutes"
        try:
            created = create_progress_artifact(
                0.0, key=_artifact_key(key), description=f"{what}: progress towards {bound}"
            )
            # async_dispatch types the result as UUID or a coroutine; a synchronous caller gets the UUID.
            self.artifact_id = cast(UUID, created)
        except Exception as exc:  # a progress bar never stops a run
            log.warning("no progress artifact (%s)", exc)

    def fraction(self, count: int) -> float:
        if self.max_count:
            return min(1.0, count / self.max_count)
        return min(1.0, (time.monotonic() - self.started) / (60 * (self.max_minutes or 1)))

    def update(self, count: int, *, done: bool = False) -> None:
        if self.artifact_id is None or (not done and time.monotonic() - self._last < self.period_s):
            return
        from prefect.artifacts import update_progress_artifact

        self._last = time.monotonic()
        try:
            update_progress_artifact(self.artifact_id, 100.0 * (1.0 if done else self.fraction(count)))
        except Exception as exc:
            log.warning("progress artifact not updated (%s)", exc)


def _artifact_key(text: str) -> str:
    """Prefect artifact keys allow lowercase letters, digits and dashes only."""
    return "".join(c if c.isalnum() else "-" for c in text.lower())
