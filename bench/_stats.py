"""Statistics over seeds for the benches, with numpy only (no scipy in the bench's import chain)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

# Two-sided 95 % Student-t quantiles t_{0.975, df}; larger df fall back to the nearest smaller entry
# (slightly wider, so the interval never claims more than it should), and ∞ to the normal 1.960.
_T975 = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
    10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
    18: 2.101, 19: 2.093, 20: 2.086, 25: 2.060, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980,
}  # fmt: skip


def t_quantile_975(df: int) -> float:
    if df < 1:
        raise ValueError(f"a t-interval needs >= 2 values (df >= 1), got df={df}")
    return _T975[max(k for k in _T975 if k <= df)] if df <= 120 else 1.960


def t_interval(values: Sequence[float]) -> dict[str, Any]:
    """Mean and 95 % t-interval mean ± t·s/√n over seeds (s: sample std); no interval for n = 1."""
    xs = [float(v) for v in values]
    n = len(xs)
    if n == 0:
        raise ValueError("no values to summarise")
    mean = sum(xs) / n
    if n == 1:
        return {"n": 1, "mean": mean, "std": None, "ci95": None}
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = t_quantile_975(n - 1) * std / math.sqrt(n)
    return {"n": n, "mean": mean, "std": std, "ci95": [mean - half, mean + half]}


def fmt_interval(summary: dict) -> str:
    ci = summary["ci95"]
    if ci is None:
        return f"{summary['mean']:.3f} (1 seed, no interval)"
    return f"{summary['mean']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"
