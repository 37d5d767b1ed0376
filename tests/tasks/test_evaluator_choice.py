"""Which version the continuous evaluator scores next, and what it resumes from."""

from __future__ import annotations

from typing import get_args

from distrl_core.envs.protocol import FAMILIES
from tasks.bounds import Family
from tasks.evaluation import OUTCOMES_TAG, PROTOCOL_TAG
from tasks.evaluator import EvaluatorParams, choose_next, newest_scored, report_from_tags


def test_keeping_up_scores_every_version_in_order() -> None:
    scored: list[int] = []
    newest = None
    for published in ([1], [1, 2], [1, 2, 3]):
        version, skipped = choose_next(published, newest)
        assert skipped == []
        scored.append(version)
        newest = version
    assert scored == [1, 2, 3]
    assert choose_next([1, 2, 3], 3) == (None, [])


def test_falling_behind_scores_the_newest_and_names_the_skipped() -> None:
    assert choose_next([1, 2, 3, 4, 5, 6], 2) == (6, [3, 4, 5])
    # Versions older than the newest scored are never scored (none twice, none backwards).
    assert choose_next([1, 2, 3], 5) == (None, [])


def test_a_restart_resumes_after_the_newest_version_scored_under_its_protocol() -> None:
    protocol = EvaluatorParams().protocol
    tags = {
        1: {PROTOCOL_TAG: protocol, OUTCOMES_TAG: "0101"},
        2: {PROTOCOL_TAG: "test:webshop:3x:seed12345", OUTCOMES_TAG: "1111"},  # another protocol
        3: {PROTOCOL_TAG: protocol, OUTCOMES_TAG: "1101"},
        4: {},
    }
    assert newest_scored(tags, protocol) == 3
    assert newest_scored({4: {}}, protocol) is None
    rebuilt = report_from_tags(3, tags[3], protocol)
    assert (
        rebuilt is not None and rebuilt["success"] == 0.75 and rebuilt["ci_low"] < 0.75 < rebuilt["ci_high"]
    )
    assert report_from_tags(2, tags[2], protocol) is None


def test_the_family_choices_are_the_task_families() -> None:
    assert set(get_args(Family)) == set(FAMILIES)
