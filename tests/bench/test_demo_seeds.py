"""bench/demo_seeds' arithmetic: which seeds count as a separated gain, and the summary over seeds."""

from __future__ import annotations

import pytest

from bench.demo_seeds import separated_gain, summarise


def _run(warm: float, warm_ci: tuple[float, float], final: float, final_ci: tuple[float, float]) -> dict:
    return {
        "heldout_success_warm_start": warm,
        "heldout_ci_warm_start": list(warm_ci),
        "heldout_success_final": final,
        "heldout_ci_final": list(final_ci),
    }


def test_a_seed_counts_when_it_gains_enough_with_disjoint_intervals() -> None:
    assert separated_gain(_run(0.40, (0.33, 0.47), 0.60, (0.53, 0.67)), 0.15)
    assert not separated_gain(_run(0.40, (0.33, 0.47), 0.52, (0.45, 0.59)), 0.15)  # too small a gain
    assert not separated_gain(_run(0.40, (0.30, 0.55), 0.56, (0.50, 0.62)), 0.15)  # intervals overlap


def test_the_summary_is_the_mean_gain_over_seeds_with_its_interval() -> None:
    runs = [_run(0.4, (0.33, 0.47), 0.6, (0.53, 0.67)), _run(0.5, (0.43, 0.57), 0.6, (0.53, 0.67))]
    summary = summarise(runs, 0.15)
    assert summary["gain"]["mean"] == pytest.approx(0.15)
    assert summary["seeds_meeting_target"] == 1
    assert summary["final"]["mean"] == pytest.approx(0.6)
