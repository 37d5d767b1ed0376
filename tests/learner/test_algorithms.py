"""One AlgorithmSpec per Algorithm: its objective and the traits the rest of the learner reads."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import pytest

from distrl_core.learner.config import ALGORITHMS, Algorithm
from distrl_core.learner.objectives import ALGORITHM_SPECS, algorithm_spec

ROOT = Path(__file__).resolve().parents[2]


def test_every_algorithm_has_a_spec():
    assert tuple(ALGORITHM_SPECS) == ALGORITHMS == get_args(Algorithm)
    assert all(callable(spec.objective) for spec in ALGORITHM_SPECS.values())


def test_the_traits_of_each_algorithm():
    traits = {
        name: (spec.uses_critic, spec.needs_groups, spec.needs_whole_episodes)
        for name, spec in ALGORITHM_SPECS.items()
    }
    assert traits == {
        "decoupled_ppo": (True, False, False),
        "aride": (True, False, False),
        "digirl": (True, False, False),
        "filtered_bc": (True, False, False),
        "gigpo": (False, True, True),
    }


def test_a_name_without_a_spec_says_where_it_goes():
    with pytest.raises(ValueError, match=r"ALGORITHM_SPECS in distrl_core/learner/objectives\.py"):
        algorithm_spec("ppo")  # type: ignore[arg-type]


def test_no_code_outside_the_spec_table_compares_an_algorithm_name():
    # `x.algorithm == "gigpo"` and the like: a trait of the algorithm's spec says it instead.
    names = set(ALGORITHMS)
    found = []
    for package in ("distrl_core", "storage", "tasks", "flows"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Compare):
                    sides = [node.left, *node.comparators]
                    if any(isinstance(s, ast.Constant) and s.value in names for s in sides):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"compare the spec's traits, not the algorithm's name: {found}"
