"""bench/time_to_target's arithmetic: which versions are evaluated, first crossing, speed-up."""

from __future__ import annotations

import pytest

from bench.time_to_target import compare, pick_versions, time_to


def test_pick_versions_keeps_the_ends_and_spreads_the_rest_in_time():
    published = [
        (v, float(t)) for v, t in zip(range(1, 12), [0, 1, 2, 3, 4, 50, 60, 70, 78, 90, 100], strict=True)
    ]
    picked = pick_versions(published, 3)
    assert picked[0] == (1, 0.0) and picked[-1] == (11, 100.0)
    assert [t for _, t in picked] == [0.0, 4.0, 50.0, 78.0, 100.0]  # nearest to 25, 50, 75
    assert pick_versions(published[:4], 3) == published[:4]


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
