"""Turning a judge model's free-text answer into a verdict.

The rule is conservative: an answer counts only when it carries an explicit marker (a ``Status:`` line,
a JSON object with a ``success``/``status`` field, or an answer that is just one yes/no word), and every
marker in it agrees. Anything else is ``UNKNOWN`` — an unparseable answer must never become a reward.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from distrl_core.evaluators.base import Verdict

SUCCESS_WORDS = frozenset(
    {"success", "successful", "succeeded", "complete", "completed", "done", "yes", "true", "pass", "passed"}
)
FAILURE_WORDS = frozenset(
    {
        "failure",
        "fail",
        "failed",
        "incomplete",
        "unsuccessful",
        "no",
        "false",
        "not success",
        "not successful",
        "not completed",
        "not complete",
        "not done",
    }
)

# A "Status: <word>" line. Markdown emphasis around the key or value is common in chat models' output.
# The value is taken whole and stripped in Python: a lazy `(.*?)\s*$` was quadratic on a long line.
_STATUS_LINE = re.compile(r"^[\s>*_`#-]*(?:final\s+)?(?:status|verdict|answer)[\s*_`]*[:=](.*)$", re.I)
# An answer is a few hundred characters (the judge asks for max_tokens); a longer one is not read:
# it cannot be a clear verdict, and scanning it would cost time on every status line.
MAX_ANSWER_CHARS = 20_000
_JSON_OBJECT = re.compile(r"\{[^{}]*\}")
_DECORATION = " \t*_`'\".,;!()[]"


@dataclass(frozen=True)
class ParsedAnswer:
    verdict: Verdict
    reason: str


def _word_verdict(raw: str) -> Verdict | None:
    """Maps one short value ("success", "**Failure**.", "yes") to a verdict; None if it is not one."""
    word = " ".join(raw.strip(_DECORATION).lower().split())
    if word in SUCCESS_WORDS:
        return Verdict.SUCCESS
    if word in FAILURE_WORDS:
        return Verdict.FAILURE
    return None


def _json_verdicts(text: str) -> list[Verdict | None]:
    found: list[Verdict | None] = []
    for match in _JSON_OBJECT.finditer(text):
        try:
            obj = json.loads(match.group(0))
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        lowered = {str(k).lower(): v for k, v in obj.items()}
        if "success" in lowered:
            value = lowered["success"]
            # Only a real JSON boolean counts; "success": "maybe" or 1 is not an explicit answer.
            found.append(
                {True: Verdict.SUCCESS, False: Verdict.FAILURE}.get(value)
                if isinstance(value, bool)
                else None
            )
        elif isinstance(lowered.get("status"), str):
            found.append(_word_verdict(lowered["status"]))
    return found


def _status_line_verdicts(text: str) -> list[Verdict | None]:
    found: list[Verdict | None] = []
    for line in text.splitlines():
        match = _STATUS_LINE.match(line)
        if match:
            found.append(_word_verdict(match.group(1).strip()))
    return found


def parse_judge_answer(text: str) -> ParsedAnswer:
    """Reads a verdict from a judge's answer; ambiguous, conflicting or unmarked answers are UNKNOWN."""
    if not text or not text.strip():
        return ParsedAnswer(Verdict.UNKNOWN, "empty answer")
    if len(text) > MAX_ANSWER_CHARS:
        return ParsedAnswer(Verdict.UNKNOWN, f"answer longer than MAX_ANSWER_CHARS={MAX_ANSWER_CHARS}")
    markers = _json_verdicts(text) + _status_line_verdicts(text)
    if not markers:
        bare = _word_verdict(text)
        if bare is not None:
            return ParsedAnswer(bare, f"bare answer {text.strip()[:40]!r}")
        return ParsedAnswer(Verdict.UNKNOWN, "no status marker in answer")
    if any(marker is None for marker in markers):
        # e.g. the model echoed the template "Status: success or failure".
        return ParsedAnswer(Verdict.UNKNOWN, "a status marker has an unrecognised value")
    distinct = {marker for marker in markers if marker is not None}
    if len(distinct) > 1:
        return ParsedAnswer(Verdict.UNKNOWN, "status markers contradict each other")
    (verdict,) = distinct
    return ParsedAnswer(verdict, f"status marker says {verdict.value}")
