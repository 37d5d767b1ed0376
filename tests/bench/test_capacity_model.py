"""The capacity model's ranking, against a small case computed by hand."""

from __future__ import annotations

import math

from bench.capacity_model import Limit, breaks_first, rank_limits

# demand per emulator / capacity -> breaks at:
#   learner      0.5 steps/s each, 100 steps/s      -> 200 emulators
#   ingest       0.5 steps/s each, 1,000 steps/s    -> 2,000
#   registry     2 bytes/s each, 10,000 bytes/s     -> 5,000 (capacity estimated)
#   worker CPU   0.01 s/s each, 1 core per process  -> 100, but per machine: listed after the central ones
LIMITS = [
    Limit("ingest", "steps/s", 0.5, 1000.0, "estimated", "measured"),
    Limit("registry", "bytes/s", 2.0, 10_000.0, "measured", "estimated"),
    Limit("worker CPU", "CPU s/s", 0.01, 1.0, "measured", "measured", central=False),
    Limit("learner", "steps/s", 0.5, 100.0, "measured", "measured"),
    Limit("idle", "calls/s", 0.0, 1.0, "measured", "measured"),
]


def test_limits_are_ranked_by_the_emulators_at_which_they_break() -> None:
    rows = rank_limits(LIMITS, [1000, 10_000])
    assert [r["resource"] for r in rows] == ["learner", "ingest", "registry", "idle", "worker CPU"]
    assert [r["breaks_at_emulators"] for r in rows[:3]] == [200.0, 2000.0, 5000.0]
    assert math.isinf(rows[3]["breaks_at_emulators"])
    assert rows[0]["load"] == {"1000": 5.0, "10000": 50.0}
    assert rows[1]["load"] == {"1000": 0.5, "10000": 5.0}
    assert rows[2]["load"] == {"1000": 0.2, "10000": 2.0}


def test_a_limit_is_measured_only_when_both_sides_are() -> None:
    by_name = {r["resource"]: r["source"] for r in rank_limits(LIMITS, [1000])}
    assert by_name == {
        "learner": "measured",
        "ingest": "estimated",
        "registry": "estimated",
        "idle": "measured",
        "worker CPU": "measured",
    }


def test_what_breaks_first_is_the_central_limit_over_capacity_that_breaks_soonest() -> None:
    assert breaks_first(LIMITS, 150) is None  # worker CPU is over (1.5 cores) but scales out
    assert breaks_first(LIMITS, 1000).resource == "learner"  # type: ignore[union-attr]
    without_learner = [x for x in LIMITS if x.resource != "learner"]
    assert breaks_first(without_learner, 1000) is None
    assert breaks_first(without_learner, 3000).resource == "ingest"  # type: ignore[union-attr]
