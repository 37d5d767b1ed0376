"""The champion rule: a paired comparison on the same episodes, checked against a plain loop and
on fixed outcomes."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from distrl_core.learner.champion import beats_with_confidence, paired_difference_interval, t_quantile


def _reference_interval(a: list[int], b: list[int]) -> tuple[float, float, float]:
    """Textbook paired t-interval, one element at a time, with scipy's exact t quantile."""
    n = len(a)
    diffs = []
    for i in range(n):
        diffs.append(a[i] - b[i])
    total = 0.0
    for d in diffs:
        total += d
    mean = total / n
    squares = 0.0
    for d in diffs:
        squares += (d - mean) ** 2
    sd = math.sqrt(squares / (n - 1))
    half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


@pytest.mark.parametrize("dof", [3, 5, 10, 30, 65, 200, 1000])
def test_t_quantile_matches_scipy(dof: int) -> None:
    assert t_quantile(0.975, dof) == pytest.approx(stats.t.ppf(0.975, dof), rel=1e-8)
    assert t_quantile(0.025, dof) == pytest.approx(stats.t.ppf(0.025, dof), rel=1e-8)


@pytest.mark.parametrize("dof", [1, 2])
def test_t_quantile_closed_forms(dof: int) -> None:
    assert t_quantile(0.975, dof) == pytest.approx(stats.t.ppf(0.975, dof), rel=1e-8)


@pytest.mark.parametrize("seed", range(5))
def test_paired_interval_matches_the_plain_loop(seed: int) -> None:
    import random

    rng = random.Random(seed)
    n = rng.randint(20, 200)
    a = [int(rng.random() < 0.6) for _ in range(n)]
    b = [int(rng.random() < 0.5) for _ in range(n)]
    got = paired_difference_interval([bool(x) for x in a], [bool(x) for x in b])
    mean, low, high = _reference_interval(a, b)
    assert got.mean == pytest.approx(mean, abs=1e-12)
    assert got.low == pytest.approx(low, abs=1e-9) and got.high == pytest.approx(high, abs=1e-9)
    assert got.challenger_wins == sum(x > y for x, y in zip(a, b, strict=True))
    assert got.champion_wins == sum(x < y for x, y in zip(a, b, strict=True))


def test_no_champion_means_the_first_scored_version_takes_it() -> None:
    assert beats_with_confidence([False, True], None) == (True, None)


def test_a_clear_paired_gain_promotes() -> None:
    # 66 episodes: the challenger solves 20 the champion missed and loses 2.
    champion = [False] * 30 + [True] * 36
    challenger = [True] * 20 + [False] * 10 + [False] * 2 + [True] * 34
    promote, diff = beats_with_confidence(challenger, champion)
    assert promote and diff is not None and diff.low > 0 and diff.mean == pytest.approx(18 / 66)


def test_a_gain_within_noise_does_not_promote_and_a_late_older_version_cannot_demote() -> None:
    # An older version evaluated after a newer champion: 3 points better on paper (its interval
    # overlaps) is not enough to move the alias back.
    champion = [True] * 40 + [False] * 26
    older = [True] * 38 + [False] * 2 + [True] * 4 + [False] * 22  # wins 4, loses 2
    promote, diff = beats_with_confidence(older, champion)
    assert not promote and diff is not None and diff.mean > 0 and diff.low < 0


def test_identical_outcomes_never_promote() -> None:
    outcomes = [True, False, True, True, False] * 13
    promote, diff = beats_with_confidence(outcomes, outcomes)
    assert not promote and diff is not None and diff.mean == 0 and diff.low == 0


def test_winning_every_episode_promotes_although_the_spread_is_zero() -> None:
    promote, diff = beats_with_confidence([True] * 10, [False] * 10)
    assert promote and diff is not None and diff.low == 1.0


def test_outcomes_of_different_protocols_are_refused() -> None:
    with pytest.raises(ValueError, match="same protocol"):
        paired_difference_interval([True] * 3, [True] * 4)
