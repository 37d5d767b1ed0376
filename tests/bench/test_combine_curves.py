"""bench/combine_curves.py: parts run on disjoint seeds join into the document one run would write."""

from __future__ import annotations

import random

import pytest

from bench.combine_curves import PartsDisagree, combine
from bench.learning_curve import summarise

METHODS = ["aride", "digirl", "gigpo"]


def part(seeds: list[int], *, methods: list[str] = METHODS, jobs: int = 2, **changed) -> dict:
    rng = random.Random(sum(seeds) + len(methods))
    settings = {
        "family": ["general"], "seeds": seeds, "env_steps": 8000, "methods": methods,
        "learner": {}, "warm": {}, "jobs": jobs, "out": f"part-{seeds[0]}.json",
        "policy": {"seed": seeds[0]}, "validation": False, **changed,
    }  # fmt: skip
    # A seed's warm start is a function of the seed (as in the bench): parts split by method share it.
    warm = [{"family": "general", "seed": s, "heldout_success": random.Random(s).random()} for s in seeds]
    runs = [
        {"family": "general", "seed": s, "method": m, "final_heldout": rng.random(), "rounds": []}
        for m in reversed(methods)  # out of order on purpose: the join sorts
        for s in seeds
    ]
    return {"settings": settings, "warm_starts": warm, "runs": runs, "machine": {"cpus": 2},
            "wall_s": 100.0 + len(seeds), "update_timing": None}  # fmt: skip


def test_parts_join_into_the_summary_of_all_seeds_and_pair_seed_by_seed():
    first, second = part([0, 1, 2]), part([3, 4], jobs=1)
    joined = combine([first, second], ["a.json", "b.json"])
    runs = first["runs"] + second["runs"]
    expected = summarise(first["warm_starts"] + second["warm_starts"], runs, ["general"], METHODS)
    by_seed = {(r["method"], r["seed"]): r["final_heldout"] for r in runs}
    aride = joined["summary"]["general"]["methods"]["aride"]["per_seed"]
    digirl = joined["summary"]["general"]["methods"]["digirl"]["per_seed"]
    assert aride == [by_seed["aride", s] for s in range(5)]
    assert digirl == [by_seed["digirl", s] for s in range(5)]
    assert joined["summary"]["general"]["aride_vs_digirl"]["paired_difference"]["n"] == 5
    assert sorted(joined["summary"]["general"]["methods"]["gigpo"]["per_seed"]) == sorted(
        expected["general"]["methods"]["gigpo"]["per_seed"]
    )
    assert joined["settings"]["seeds"] == [0, 1, 2, 3, 4] and joined["settings"]["jobs"] == [2, 1]
    assert joined["wall_s"] == 205.0 and [p["seeds"] for p in joined["combined_from"]] == [[0, 1, 2], [3, 4]]


def test_parts_with_other_settings_are_refused_by_name():
    with pytest.raises(PartsDisagree, match=r"b\.json was run with env_steps=4000"):
        combine([part([0, 1]), part([2], env_steps=4000)], ["a.json", "b.json"])
    with pytest.raises(PartsDisagree, match="learner"):
        combine([part([0]), part([1], learner={"actor_lr": 1e-3})], ["a.json", "b.json"])


def test_a_part_older_than_a_setting_ran_as_its_default():
    # Written before `encoder_layers` and LearnerConfig.backbone_lr existed: it ran as their defaults do.
    older = part([0, 1], learner_defaults={"actor_lr": 3e-4})
    newer = part([2], encoder_layers=1, learner_defaults={"actor_lr": 3e-4, "backbone_lr": None})
    assert combine([older, newer], ["a.json", "b.json"])["settings"]["seeds"] == [0, 1, 2]
    with pytest.raises(PartsDisagree, match=r"b\.json was run with encoder_layers=0 but a\.json with 1"):
        combine([older, part([2], encoder_layers=0)], ["a.json", "b.json"])
    with pytest.raises(PartsDisagree, match="learner_defaults"):
        combine(
            [older, part([2], learner_defaults={"actor_lr": 3e-4, "backbone_lr": 1e-4})], ["a.json", "b.json"]
        )


def test_parts_split_by_method_pair_on_their_shared_seeds():
    first, second = part([0, 1, 2], methods=["aride", "digirl"]), part([0, 1, 2], methods=["gigpo"])
    joined = combine([first, second], ["a.json", "b.json"])
    assert joined["settings"]["methods"] == ["aride", "digirl", "gigpo"]
    gigpo = {r["seed"]: r["final_heldout"] for r in second["runs"]}
    aride = {r["seed"]: r["final_heldout"] for r in first["runs"] if r["method"] == "aride"}
    difference = joined["summary"]["general"]["vs_aride"]["gigpo"]
    assert difference["n"] == 3
    assert difference["mean"] == pytest.approx(sum(gigpo[s] - aride[s] for s in range(3)) / 3)


def test_a_run_given_twice_a_changed_warm_start_or_a_hole_is_refused():
    with pytest.raises(PartsDisagree, match=r"\w+ on seed 1 \(general\) is in both a\.json and b\.json"):
        combine([part([0, 1]), part([1, 2])], ["a.json", "b.json"])
    moved = part([0], methods=["gigpo"])
    moved["warm_starts"][0]["heldout_success"] += 0.01
    with pytest.raises(PartsDisagree, match=r"seed 0 \(general\) starts from a different warm start"):
        combine([part([0], methods=["aride"]), moved], ["a.json", "b.json"])
    with pytest.raises(PartsDisagree, match=r"missing: gigpo on seed 1 \(general\)"):
        combine([part([0, 1], methods=["aride"]), part([0], methods=["gigpo"])], ["a.json", "b.json"])
