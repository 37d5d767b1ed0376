"""bench/time_to_target's arithmetic: smoothed levels, first crossing, speed-up, runs kept in parts."""

from __future__ import annotations

import json

import pytest

from bench.time_to_target import (
    PART_KEYS,
    compare,
    equal_wall_clock,
    load_parts,
    save_part,
    smoothed,
    success_at,
    time_to,
)


def _run(seed, mode, points, budget=300.0):
    curve = [{"version": i + 1, "t_s": t, "success": s} for i, (t, s) in enumerate(points)]
    return {"seed": seed, "mode": mode, "budget_s": budget, "curve": curve}


def test_levels_are_trailing_means_of_three_evaluated_versions():
    curve = _run(0, "async", [(0, 0.2), (30, 0.5), (60, 0.4), (90, 0.6)])["curve"]
    assert smoothed(curve) == pytest.approx([0.2, 0.35, 1.1 / 3, 0.5])


def test_time_to_target_is_the_first_smoothed_crossing_and_censors_at_the_budget():
    curve = _run(0, "async", [(0, 0.2), (30, 0.5), (60, 0.4), (90, 0.6)])["curve"]
    # One lucky evaluation (0.5 at 30 s) does not reach 0.45; three in a row averaging 0.5 do.
    assert time_to(curve, 0.45, 300.0) == (90, False)
    assert time_to(curve, 0.36, 300.0) == (60, False)
    assert time_to(curve, 0.9, 300.0) == (300.0, True)


def test_compare_uses_the_sync_final_level_unless_a_target_is_fixed():
    runs = [
        _run(0, "sync", [(0, 0.2), (100, 0.3), (200, 0.5), (300, 0.4), (350, 0.6)]),  # final: mean 0.5
        _run(0, "async", [(0, 0.2), (40, 0.6), (70, 0.7), (80, 0.7)]),  # smoothed 0.2, 0.4, 0.5, 0.67
    ]
    [row] = compare(runs, None)
    assert row["target"] == pytest.approx(0.5) and row["t_sync_s"] == 350 and row["t_async_s"] == 70
    assert row["speedup"] == pytest.approx(5.0) and not row["async_censored"] and row["sync_improved"]
    [fixed] = compare(runs, 0.65)
    assert fixed["t_sync_s"] == 300.0 and fixed["sync_censored"] and fixed["t_async_s"] == 80


def test_a_sync_run_ending_below_its_warm_start_has_no_speedup():
    runs = [
        _run(0, "sync", [(0, 0.4), (100, 0.2), (200, 0.2), (300, 0.25)]),
        _run(0, "async", [(0, 0.4), (50, 0.6)]),
    ]
    [row] = compare(runs, None)
    assert not row["sync_improved"] and row["t_sync_s"] == 0 and row["speedup"] is None


def test_success_at_equal_wall_clock_is_the_smoothed_level_of_the_newest_version_by_then():
    curve = _run(0, "async", [(0, 0.2), (30, 0.5), (60, 0.4)])["curve"]
    assert success_at(curve, 45) == pytest.approx(0.35) and success_at(curve, -1) is None
    runs = [
        _run(0, "sync", [(0, 0.2), (250, 0.3)]),
        _run(0, "async", [(0, 0.2), (100, 0.5), (310, 0.9)]),  # published after the budget: not counted
        _run(1, "sync", [(0, 0.3), (200, 0.35)]),
        _run(1, "async", [(0, 0.3), (150, 0.45)]),
    ]
    per_seed = compare(runs, None)
    assert [s["async_success_at_budget"] for s in per_seed] == pytest.approx([0.35, 0.375])
    summary = equal_wall_clock(per_seed)
    assert summary["async_minus_sync"]["mean"] == pytest.approx(((0.35 - 0.25) + (0.375 - 0.325)) / 2)


def test_parts_made_with_other_settings_are_named_and_left_out(tmp_path, capsys):
    settings = {k: 1 for k in PART_KEYS} | {"family": "general"}
    save_part(tmp_path, settings, _run(0, "sync", [(0, 0.2)]))
    save_part(tmp_path, settings, _run(0, "async", [(0, 0.2)]))
    other = tmp_path / "general-seed1-sync.json"
    part = json.loads((tmp_path / "general-seed0-sync.json").read_text())
    part["settings"]["minutes"] = 30
    other.write_text(json.dumps(part | {"run": _run(1, "sync", [(0, 0.3)])}))
    runs = load_parts(tmp_path, settings)
    assert sorted((r["seed"], r["mode"]) for r in runs) == [(0, "async"), (0, "sync")]
    assert "general-seed1-sync.json: made with other settings (minutes)" in capsys.readouterr().out
    assert load_parts(tmp_path, settings | {"family": "webshop"}) == []


def test_the_geometric_speedup_is_the_mean_of_logs_mapped_back():
    from bench.time_to_target import geometric_interval

    summary = geometric_interval([2.0, 8.0])
    assert summary["mean"] == pytest.approx(4.0)
    low, high = summary["ci95"]
    assert low < 4.0 < high and low * high == pytest.approx(16.0)  # symmetric on the log scale
    assert geometric_interval([3.0])["ci95"] is None


@pytest.mark.parametrize(
    ("setting", "old_behaviour", "other"),
    [("evaluator_thread", True, False), ("base", None, "minilm"), ("paraphrase", 0.0, 0.8)],
    ids=["evaluator-was-a-thread", "policy-was-tiny", "instructions-were-the-templates"],
)
def test_parts_saved_before_a_setting_existed_count_as_its_old_behaviour(
    tmp_path, setting, old_behaviour, other
):
    settings = {k: 1 for k in PART_KEYS} | {"family": "general", setting: old_behaviour}
    save_part(tmp_path, settings, _run(0, "sync", [(0, 0.2)]))
    path = tmp_path / "general-seed0-sync.json"
    part = json.loads(path.read_text())
    del part["settings"][setting]  # as written before the setting existed
    path.write_text(json.dumps(part))
    assert [r["seed"] for r in load_parts(tmp_path, settings)] == [0]
    assert load_parts(tmp_path, settings | {setting: other}) == []


def test_a_run_refuses_to_overwrite_parts_made_with_other_settings(tmp_path):
    from bench.time_to_target import run_all

    settings = {k: 1 for k in PART_KEYS} | {"family": "general", "seeds": [0], "jobs": 1}
    save_part(tmp_path, settings, _run(0, "sync", [(0, 0.2)]))
    before = (tmp_path / "general-seed0-sync.json").read_text()
    with pytest.raises(SystemExit, match=r"general-seed0-sync\.json.*--parts with a folder of its own"):
        run_all(settings | {"warm_start_updates": 300}, tmp_path / "runs", tmp_path)
    assert (tmp_path / "general-seed0-sync.json").read_text() == before
