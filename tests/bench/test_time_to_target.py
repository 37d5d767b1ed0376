"""bench/time_to_target's arithmetic: which versions are evaluated, first crossing, speed-up."""

from __future__ import annotations

import pytest

from bench.time_to_target import compare, equal_wall_clock, success_at, time_to


def _run(seed, mode, points, budget=300.0):
    curve = [{"version": i + 1, "t_s": t, "success": s} for i, (t, s) in enumerate(points)]
    return {"seed": seed, "mode": mode, "budget_s": budget, "curve": curve}


def test_time_to_target_is_the_first_crossing_and_censors_at_the_budget():
    curve = _run(0, "async", [(0, 0.2), (30, 0.5), (60, 0.4), (90, 0.6)])["curve"]
    assert time_to(curve, 0.45, 300.0) == (30, False)
    assert time_to(curve, 0.9, 300.0) == (300.0, True)


def test_compare_uses_the_sync_final_level_unless_a_target_is_fixed():
    runs = [
        _run(0, "sync", [(0, 0.2), (100, 0.3), (200, 0.5), (300, 0.4), (350, 0.6)]),  # final: mean 0.5
        _run(0, "async", [(0, 0.2), (40, 0.55), (80, 0.7)]),
    ]
    [row] = compare(runs, None)
    assert row["target"] == pytest.approx(0.5) and row["t_sync_s"] == 200 and row["t_async_s"] == 40
    assert row["speedup"] == pytest.approx(5.0) and not row["async_censored"]
    [fixed] = compare(runs, 0.65)
    assert fixed["t_sync_s"] == 300.0 and fixed["sync_censored"] and fixed["t_async_s"] == 80


def test_success_at_equal_wall_clock_is_the_newest_version_published_by_then():
    curve = _run(0, "async", [(0, 0.2), (30, 0.5), (60, 0.4)])["curve"]
    assert success_at(curve, 45) == 0.5 and success_at(curve, 60) == 0.4 and success_at(curve, -1) is None
    runs = [
        _run(0, "sync", [(0, 0.2), (250, 0.3)]),
        _run(0, "async", [(0, 0.2), (100, 0.5), (310, 0.9)]),  # published after the budget: not counted
        _run(1, "sync", [(0, 0.3), (200, 0.35)]),
        _run(1, "async", [(0, 0.3), (150, 0.45)]),
    ]
    per_seed = compare(runs, None)
    assert [s["async_success_at_budget"] for s in per_seed] == [0.5, 0.45]
    summary = equal_wall_clock(per_seed)
    assert summary["async_minus_sync"]["mean"] == pytest.approx((0.2 + 0.1) / 2)
