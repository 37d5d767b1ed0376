from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distrl_core.evaluators.base import Verdict
from distrl_core.evaluators.judge_parse import SUCCESS_WORDS, parse_judge_answer


@pytest.mark.parametrize(
    "answer",
    [
        "Expected: settings open\nObserved: settings open\nStatus: success",
        "Q: ...\nA: I see the alarm set.\nStatus: Success.",
        "**Status:** **success**",
        '{"success": true, "reason": "cart shows the item"}',
        'Sure. ```json\n{"status": "success"}\n```',
        "yes",
        "  Completed. ",
        "Final status = successful",
    ],
)
def test_explicit_success_forms(answer: str) -> None:
    assert parse_judge_answer(answer).verdict is Verdict.SUCCESS


@pytest.mark.parametrize(
    "answer",
    [
        "Expected: wifi off\nObserved: wifi on\nStatus: failure",
        "status: FAILED",
        "Status: not successful",
        '{"success": false}',
        "No.",
        "verdict: incomplete",
    ],
)
def test_explicit_failure_forms(answer: str) -> None:
    assert parse_judge_answer(answer).verdict is Verdict.FAILURE


@pytest.mark.parametrize(
    "answer",
    [
        "",
        "   ",
        "The screen shows the settings app.",
        "I think the task was a success, probably.",  # prose, no marker
        "Status: success or failure",  # the template echoed back
        "Status: success\nStatus: failure",  # contradiction
        '{"success": true}\nStatus: failure',  # JSON and status line disagree
        '{"success": "yes"}',  # not a JSON boolean
        '{"success": 1}',
        "Status: maybe",
        "Status:",
        "yes no",
    ],
)
def test_ambiguous_or_unparseable_is_unknown(answer: str) -> None:
    assert parse_judge_answer(answer).verdict is Verdict.UNKNOWN


# A success marker needs one of these words somewhere (or a JSON true); the parser must not find
# success in text that has none of them.
_SUCCESS_EVIDENCE = re.compile("|".join(sorted(SUCCESS_WORDS)), re.I)


def _has_success_evidence(text: str) -> bool:
    return bool(_SUCCESS_EVIDENCE.search(text))


_near_miss_pieces = st.sampled_from(
    [
        "Status:",
        "status =",
        "Verdict:",
        "success",
        "failure",
        "succes",
        "sucess",
        "not",
        "or",
        "{",
        "}",
        '"success":',
        "true",
        "false",
        "null",
        "\n",
        " ",
        "**",
        "maybe",
        "unclear",
        "yes",
        "no",
        "Status: successor",
        "Status: successfully maybe",
    ]
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200))
def test_random_text_is_never_success_without_a_marker(text: str) -> None:
    result = parse_judge_answer(text)
    if result.verdict is Verdict.SUCCESS:
        assert _has_success_evidence(text), (text, result)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_near_miss_pieces | st.text(max_size=8), max_size=12).map("".join))
def test_near_miss_text_is_never_success_without_a_marker(text: str) -> None:
    result = parse_judge_answer(text)
    if result.verdict is Verdict.SUCCESS:
        assert _has_success_evidence(text), (text, result)
    # never an exception, always one of the three verdicts
    assert result.verdict in set(Verdict)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120).filter(lambda s: not _has_success_evidence(s)), st.text(max_size=60))
def test_a_failure_marker_is_never_turned_into_success(prefix: str, suffix: str) -> None:
    text = f"{prefix}\nStatus: failure\n{suffix}"
    assert parse_judge_answer(text).verdict is not Verdict.SUCCESS
