"""The benches' statistics over seeds: t-intervals and curves aligned by round."""

from __future__ import annotations

import pytest

from bench._curves import mean_curve
from bench._stats import t_interval, t_quantile_975


def test_t_interval_by_hand():
    s = t_interval([0.5, 0.6, 0.7])
    # s = 0.1, t(0.975, 2) = 4.303: half-width 4.303 · 0.1 / √3 = 0.24844
    assert s["mean"] == pytest.approx(0.6) and s["std"] == pytest.approx(0.1)
    assert s["ci95"] == pytest.approx([0.6 - 0.248434, 0.6 + 0.248434], abs=1e-5)
    assert t_interval([0.3])["ci95"] is None
    assert t_quantile_975(1) == 12.706 and t_quantile_975(27) == 2.060 and t_quantile_975(10_000) == 1.96
    with pytest.raises(ValueError, match="df >= 1"):
        t_quantile_975(0)


def test_mean_curve_cuts_to_the_shortest_run_and_clips_the_band():
    runs = [
        {"rounds": [{"env_steps": 0, "heldout_success": 0.0}, {"env_steps": 100, "heldout_success": 1.0}]},
        {"rounds": [{"env_steps": 0, "heldout_success": 0.0}, {"env_steps": 120, "heldout_success": 0.5},
                    {"env_steps": 250, "heldout_success": 0.9}]},
    ]  # fmt: skip
    curve = mean_curve(runs)
    assert curve["env_steps"] == [0, 110] and curve["mean"] == [0.0, 0.75]
    assert curve["low"][1] == 0.0 and curve["high"][1] == 1.0  # t(1) = 12.7: the band fills [0, 1]
