"""When a policy version may replace the champion: a paired comparison on the same episodes.

Every evaluation of one protocol (split, families, episodes per task, seed) plays the same
episodes: the same task under the same environment seed, in the same order. Two versions'
outcomes therefore pair up episode by episode, and the paired difference d_i = new_i - old_i
cancels the episode's own difficulty, which dominates the noise of two independent rates.

The rule: the challenger becomes champion only when the lower end of the 95 % interval of
mean(d) is above 0 (a t-interval on the n paired differences). An older version evaluated late
can therefore only take over when it is better with the same confidence, never by noise.

    >>> paired_difference_interval([True, True, False, True], [False, True, False, False]).mean
    0.5
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["PairedDifference", "beats_with_confidence", "paired_difference_interval", "t_quantile"]


def _t_two_sided(t: float, dof: int) -> float:
    """P(|T| <= t) for Student's t with integer `dof` (Abramowitz & Stegun 26.7.3-4: finite sums)."""
    theta = math.atan(t / math.sqrt(dof))
    sin, cos2 = math.sin(theta), math.cos(theta) ** 2
    if dof % 2 == 0:
        term, total = 1.0, 1.0
        for k in range(1, dof // 2):
            term *= cos2 * (2 * k - 1) / (2 * k)
            total += term
        return sin * total
    if dof == 1:
        return 2 * theta / math.pi
    term, total = 1.0, 1.0
    for k in range(1, (dof - 1) // 2):
        term *= cos2 * (2 * k) / (2 * k + 1)
        total += term
    return 2 / math.pi * (theta + sin * math.cos(theta) * total)


def t_quantile(p: float, dof: int) -> float:
    """Quantile of Student's t with integer `dof` degrees of freedom, by bisection on its exact CDF
    (no scipy: the evaluator runs in the lean runtime environment)."""
    if dof < 1:
        raise ValueError(f"t_quantile needs at least 1 degree of freedom, got {dof}")
    if not 0 < p < 1:
        raise ValueError(f"t_quantile needs 0 < p < 1, got {p}")
    target = abs(2 * p - 1)  # P(|T| <= q) for the upper quantile q
    low, high = 0.0, 1.0
    while _t_two_sided(high, dof) < target:
        high *= 2
    for _ in range(200):
        mid = (low + high) / 2
        if _t_two_sided(mid, dof) < target:
            low = mid
        else:
            high = mid
        if high - low < 1e-12:
            break
    q = (low + high) / 2
    return q if p >= 0.5 else -q


@dataclass(frozen=True)
class PairedDifference:
    """Mean paired difference (challenger minus champion) and its two-sided interval."""

    mean: float
    low: float
    high: float
    pairs: int
    challenger_wins: int  # episodes the challenger solved and the champion did not
    champion_wins: int


def paired_difference_interval(
    challenger: Sequence[bool], champion: Sequence[bool], confidence: float = 0.95
) -> PairedDifference:
    """The t-interval of mean(challenger_i - champion_i) over episodes paired by position."""
    if len(challenger) != len(champion):
        raise ValueError(
            f"paired outcomes differ in length ({len(challenger)} vs {len(champion)}): both versions "
            "must be evaluated with the same protocol (split, families, episodes per task, seed)"
        )
    n = len(challenger)
    if n == 0:
        raise ValueError("no paired outcomes to compare")
    diffs = [int(a) - int(b) for a, b in zip(challenger, champion, strict=True)]  # (n,)
    mean = sum(diffs) / n
    wins = sum(d > 0 for d in diffs)
    losses = sum(d < 0 for d in diffs)
    if n == 1:  # one pair says nothing about the spread
        return PairedDifference(mean, -1.0, 1.0, n, wins, losses)
    variance = sum((d - mean) ** 2 for d in diffs) / (n - 1)
    half = t_quantile(0.5 + confidence / 2, n - 1) * math.sqrt(variance / n)
    return PairedDifference(mean, mean - half, mean + half, n, wins, losses)


def beats_with_confidence(
    challenger: Sequence[bool],
    champion: Sequence[bool] | None,
    confidence: float = 0.95,
    margin: float = 0.0,
) -> tuple[bool, PairedDifference | None]:
    """(promote?, the comparison): promote when there is no champion, or when the lower end of the
    paired difference's interval is above `margin` (0: better with confidence)."""
    if champion is None:
        return True, None
    diff = paired_difference_interval(challenger, champion, confidence)
    return diff.low > margin, diff
