"""bench.suite_profile's arithmetic: tiers, sums and the slowest tests with their CPU/wall ratio."""

from __future__ import annotations

import json

from bench import suite_profile


def test_tiers_are_the_top_level_folders_and_files_directly_in_tests_share_one():
    assert suite_profile.tier("tests/flows/test_run.py::test_x[1]") == "tests/flows"
    assert suite_profile.tier("tests/integration/deep/test_y.py::test_z") == "tests/integration"
    assert suite_profile.tier("tests/test_docs.py::test_a") == "tests/*.py"


def test_summary_sums_per_tier_and_ranks_the_slowest_first():
    rows = {
        "tests/flows/test_a.py::test_wait": (40.0, 4.0),
        "tests/flows/test_a.py::test_fast": (1.0, 1.0),
        "tests/algos/test_b.py::test_compute": (10.0, 9.5),
    }
    summary = suite_profile.summarise(rows, 30.0)
    assert summary["tests"] == 3 and summary["run_wall_s"] == 30.0
    assert summary["sum_test_wall_s"] == 51.0 and summary["sum_test_cpu_s"] == 14.5
    assert list(summary["tiers"]) == ["tests/flows", "tests/algos"]
    assert summary["tiers"]["tests/flows"] == {"tests": 2, "wall_s": 41.0, "cpu_s": 5.0}
    assert [row["test"] for row in summary["slowest"]][:2] == [
        "tests/flows/test_a.py::test_wait",
        "tests/algos/test_b.py::test_compute",
    ]
    assert summary["slowest"][0]["cpu_per_wall"] == 0.1


def test_recorded_rows_of_two_workers_are_merged(tmp_path):
    (tmp_path / "gw0.json").write_text(json.dumps({"tests/x/test_a.py::t": [2.0, 1.0]}))
    (tmp_path / "gw1.json").write_text(json.dumps({"tests/y/test_b.py::t": [3.0, 3.0]}))
    code = suite_profile.main(
        [
            "--rows",
            str(tmp_path / "gw0.json"),
            str(tmp_path / "gw1.json"),
            "--out",
            "s",
            "--results-dir",
            str(tmp_path),
        ]
    )
    result = json.loads((tmp_path / "s.json").read_text())
    assert code == 0 and result["tests"] == 2 and result["sum_test_wall_s"] == 5.0
