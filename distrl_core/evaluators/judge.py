"""The model judge: asks a (vision-)language model whether the episode's final screen shows the task done.

One evaluator, :class:`ModelJudge`, over a small backend interface (:class:`JudgeBackend`: a prompt in,
the model's text out). Backends: :mod:`~distrl_core.evaluators.judge_http` (OpenAI-compatible
chat-completions endpoint) and :mod:`~distrl_core.evaluators.judge_local` (a local Hugging Face model).

Decisions a collector relies on:

* The answer is parsed conservatively (:func:`parse_judge_answer`): unparseable -> ``UNKNOWN``.
* When a backend cannot produce an answer at all (retries exhausted on 429/5xx, timeouts, a rejected
  request, a malformed response body) it raises :class:`JudgeError`; :meth:`ModelJudge.evaluate` turns
  that into ``UNKNOWN`` with the error in ``reason`` and logs a warning, so a judge outage never crashes
  a collector and never produces a reward. Call the backend directly to get the exception.
* Re-judging an unchanged screen of the same episode is skipped and the previous verdict returned with
  ``skipped_call=True`` (DigiRL skips unchanged screenshots the same way, to save judge calls).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

from distrl_core.evaluators.base import EpisodeContext, EvalResult, Verdict
from distrl_core.evaluators.judge_parse import parse_judge_answer
from distrl_core.evaluators.judge_prompt import JudgePrompt, build_judge_prompt

log = logging.getLogger(__name__)


class JudgeError(RuntimeError):
    """The judge backend could not produce an answer. Messages never contain credentials."""


class JudgeUnavailable(JudgeError):
    """Retries were exhausted on rate limits, server errors, timeouts or connection failures."""


class JudgeRequestRejected(JudgeError):
    """The endpoint refused the request for good (e.g. 400 bad request, 401/403 bad API key, 404 model)."""


class JudgeBadResponse(JudgeError):
    """The endpoint answered 2xx but the body was not a chat-completions response."""


class JudgeBackend(Protocol):
    """Something that answers a judge prompt with text."""

    @property
    def name(self) -> str:
        """Short identifier used in ``EvalResult.source``, e.g. ``"http:gpt-4o"``."""
        ...

    @property
    def uses_images(self) -> bool:
        """True when the backend can read screenshots; text-only backends get the compact UI text."""
        ...

    def complete(self, prompt: JudgePrompt) -> str: ...


@dataclass(frozen=True)
class JudgeConfig:
    """How :class:`ModelJudge` builds prompts and caches verdicts.

    max_screenshots: how many of the newest screenshots to show the judge (DigiRL shows the last one).
    max_actions: how many of the most recent actions to list in the prompt (0 lists none).
    ui_text_max_chars: cap on the compact UI text given to text-only judges, to bound prompt length.
    skip_unchanged: skip the call when the episode's screen is unchanged since its last judged screen.
    cache_key_includes_actions: the "unchanged" test also compares the action list given to the judge.
        Keep True when the judge is asked once per episode; set False when judging after every step and
        a repeated screen should be skipped even though one more (ineffective) action was taken.
    max_cached_episodes: how many episodes' last verdicts to keep (least recently judged dropped first).
    """

    max_screenshots: int = 1
    max_actions: int = 5
    ui_text_max_chars: int = 2000
    skip_unchanged: bool = True
    cache_key_includes_actions: bool = True
    max_cached_episodes: int = 4096

    def __post_init__(self) -> None:
        if self.max_screenshots < 1:
            raise ValueError(f"JudgeConfig.max_screenshots must be >= 1 (got {self.max_screenshots}).")
        if self.max_actions < 0:
            raise ValueError(
                f"JudgeConfig.max_actions must be >= 0 (got {self.max_actions}); use 0 for none."
            )
        if self.ui_text_max_chars < 1:
            raise ValueError(f"JudgeConfig.ui_text_max_chars must be >= 1 (got {self.ui_text_max_chars}).")
        if self.max_cached_episodes < 1:
            raise ValueError(
                f"JudgeConfig.max_cached_episodes must be >= 1 (got {self.max_cached_episodes}); "
                "set skip_unchanged=False to disable the cache instead."
            )


class ModelJudge:
    """Evaluator that asks a model whether the final screen shows the task completed."""

    def __init__(self, backend: JudgeBackend, config: JudgeConfig | None = None) -> None:
        self.backend = backend
        self.config = config or JudgeConfig()
        self.source = f"judge:{backend.name}"
        self.calls = 0  # backend calls made, for accounting and tests
        self._last_by_episode: OrderedDict[str, tuple[str, EvalResult]] = OrderedDict()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ModelJudge(backend={self.backend!r}, config={self.config!r})"

    def _screen_key(self, context: EpisodeContext) -> str:
        digest = hashlib.sha256()
        screen = context.last_screenshot
        if screen is not None:
            digest.update(b"png\0" + screen)
        else:
            digest.update(b"ui\0" + (context.ui_text or "").encode())
        if self.config.cache_key_includes_actions:
            recent = list(context.actions)[-self.config.max_actions :] if self.config.max_actions else []
            for action in recent:
                digest.update(b"\0act\0" + action.encode())
        return digest.hexdigest()

    def _cached(self, episode_id: str, key: str) -> EvalResult | None:
        with self._lock:
            entry = self._last_by_episode.get(episode_id)
            if entry is None or entry[0] != key:
                return None
            self._last_by_episode.move_to_end(episode_id)
            return entry[1]

    def _remember(self, episode_id: str, key: str, result: EvalResult) -> None:
        with self._lock:
            self._last_by_episode[episode_id] = (key, result)
            self._last_by_episode.move_to_end(episode_id)
            while len(self._last_by_episode) > self.config.max_cached_episodes:
                self._last_by_episode.popitem(last=False)

    def forget(self, episode_id: str) -> None:
        """Drops an episode's cached verdict (call when the episode ends to free memory early)."""
        with self._lock:
            self._last_by_episode.pop(episode_id, None)

    def evaluate(self, context: EpisodeContext) -> EvalResult:
        episode_id = context.episode_id if self.config.skip_unchanged else None
        key = self._screen_key(context) if episode_id is not None else ""
        if episode_id is not None:
            cached = self._cached(episode_id, key)
            if cached is not None:
                return EvalResult(cached.verdict, cached.reason, cached.source, skipped_call=True)

        prompt = build_judge_prompt(
            context,
            use_images=self.backend.uses_images,
            max_screenshots=self.config.max_screenshots,
            max_actions=self.config.max_actions,
            ui_text_max_chars=self.config.ui_text_max_chars,
        )
        with self._lock:
            self.calls += 1
        try:
            answer = self.backend.complete(prompt)
        except JudgeError as exc:
            log.warning("judge %s gave no answer: %s", self.backend.name, exc)
            return EvalResult(Verdict.UNKNOWN, f"judge error: {exc}", self.source)

        parsed = parse_judge_answer(answer)
        result = EvalResult(parsed.verdict, parsed.reason, self.source)
        # An unknown verdict is not cached: the next look at the same screen deserves a fresh answer.
        if episode_id is not None and parsed.verdict is not Verdict.UNKNOWN:
            self._remember(episode_id, key, result)
        return result
