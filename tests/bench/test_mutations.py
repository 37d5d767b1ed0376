"""bench/mutations.py stays in step with the code it mutates: each edit still applies exactly once,
and each changes the module (a mutation that no longer matches would silently test nothing)."""

from __future__ import annotations

from pathlib import Path

from bench.mutations import MUTATIONS, REPO


def test_every_mutation_applies_once_and_changes_its_module():
    for mutation in MUTATIONS:
        source = (REPO / mutation.path).read_text()
        assert source.count(mutation.old) == 1, (mutation.what, mutation.path)
        assert mutation.old != mutation.new
        assert (REPO / mutation.tests.partition("::")[0]).is_file()


def test_every_new_learner_option_has_a_mutation():
    assert {m.option for m in MUTATIONS} == {
        "positive_replay",
        "failure_curriculum",
        "shortest_path",
        "decoupled_ppo",
    }
    assert all(Path(REPO / m.path).is_relative_to(REPO / "distrl_core") for m in MUTATIONS)
