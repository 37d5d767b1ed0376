"""Evaluation: several episodes per task, exact on a re-run, Wilson intervals, the validation split."""

from __future__ import annotations

import pytest

from simulators.evaluation import estimate_from_outcomes, estimate_success, wilson_interval
from simulators.simdroid.tasks import load_tasks, validation_split


def test_wilson_interval_brackets_the_rate_and_narrows_with_n():
    low, high = wilson_interval(30, 66)
    assert low < 30 / 66 < high
    low3, high3 = wilson_interval(90, 198)
    assert high3 - low3 < high - low
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_estimate_repeats_every_task_and_is_exact_on_a_rerun(make_policy):
    tasks = load_tasks("general", "test")[:6]
    policy = make_policy().eval()
    first = estimate_success(policy, tasks, episodes_per_task=3, parallel=4)
    again = estimate_success(make_policy().eval(), tasks, episodes_per_task=3, parallel=6)
    assert first.episodes == 18 and first.episodes_per_task == 3
    assert set(first.per_task) == {t.task_id for t in tasks}
    assert (first.successes, first.per_task) == (again.successes, again.per_task)
    assert first.ci_low <= first.success <= first.ci_high
    with pytest.raises(ValueError, match="episodes_per_task"):
        estimate_success(policy, tasks, episodes_per_task=0)


def test_estimate_from_outcomes_groups_by_task_and_family():
    estimate = estimate_from_outcomes(
        [("general", "a", True), ("general", "a", False), ("webshop", "b", True)], episodes_per_task=2
    )
    assert estimate.success == pytest.approx(2 / 3)
    assert estimate.per_task == {"a": 0.5, "b": 1.0}
    assert estimate.per_family == {"general": 0.5, "webshop": 1.0}


@pytest.mark.parametrize("family", ["general", "webshop"])
def test_validation_is_carved_from_train_by_phrasing(family):
    fit, validation = validation_split(family)
    train = load_tasks(family, "train")
    assert len(fit) + len(validation) == len(train) and validation and fit
    assert {t.task_id for t in fit}.isdisjoint(t.task_id for t in validation)
    assert all(t.split == "train" for t in fit + validation)
    assert all(t.params["template"].endswith("-0") for t in validation)
    assert not any(t.params["template"].endswith("-0") for t in fit)
    assert validation_split(family) == (fit, validation)
