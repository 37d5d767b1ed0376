"""Verdict types and the one-method evaluator interface shared by every evaluator.

An evaluator looks at the end of an episode (or the state after a step) and says whether the task was
completed. Rule-based evaluators read device state; model judges read screenshots and text. Both
answer with an :class:`EvalResult` so collectors treat them alike.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


class Verdict(enum.StrEnum):
    """Outcome of an evaluation. ``UNKNOWN`` is never to be read as success."""

    SUCCESS = "success"
    FAILURE = "failure"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class EvalResult:
    """One evaluation.

    verdict: success, failure, or unknown (the evaluator could not decide, e.g. the judge's answer was
        unparseable, the judge was unreachable, or the device was offline).
    reason: a short human-readable explanation (parser finding, error summary, rule name).
    source: which evaluator produced it, e.g. ``"sim_rules"``, ``"judge:http:<model>"``.
    skipped_call: True when no model was queried because the screen had not changed since the last
        judged screenshot of this episode; the cached verdict is returned.
    """

    verdict: Verdict
    reason: str
    source: str
    skipped_call: bool = False

    @property
    def success(self) -> bool:
        return self.verdict is Verdict.SUCCESS


@dataclass(frozen=True)
class EpisodeContext:
    """What an evaluator may look at.

    instruction: the natural-language task given to the agent.
    task: the environment's task object (SimDroid ``Task``), when known; rule-based evaluators need it.
    screenshots: PNG bytes of the last screenshots, newest last (may be empty for text-only setups).
    actions: the last actions as formatted strings, oldest first.
    ui_text: optional compact UI tree text; text-only judges read it instead of the screenshot.
    device: optional device handle (e.g. a SimDroid) for rule-based checks.
    episode_id: identifies the episode so a judge can skip re-judging an unchanged screen; without it
        nothing is cached.
    """

    instruction: str
    task: Any | None = None
    screenshots: Sequence[bytes] = field(default_factory=tuple)
    actions: Sequence[str] = field(default_factory=tuple)
    ui_text: str | None = None
    device: Any | None = None
    episode_id: str | None = None

    @property
    def last_screenshot(self) -> bytes | None:
        return self.screenshots[-1] if self.screenshots else None


@runtime_checkable
class Evaluator(Protocol):
    """Anything that turns an :class:`EpisodeContext` into an :class:`EvalResult`."""

    def evaluate(self, context: EpisodeContext) -> EvalResult: ...
