"""The task selections carved from train (`load_tasks(family, "fit_words")` and the like), and every
place that names a split taking them where they make sense."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from distrl_core.policy.tokenizer import split_words
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from simulators.simdroid.tasks import (
    PARAMETER_OF,
    SELECTIONS,
    SPLIT_CHOICES,
    get_task,
    load_tasks,
    train_templates,
    unseen_split,
    validation_split,
)
from simulators.warm_start import WarmStartConfig
from tasks.collector import CollectorParams
from tasks.evaluation import in_distribution_split
from tasks.evaluator import EvaluatorParams

TRAIN_TEMPLATES = train_templates()


def _ids(tasks: list) -> set[str]:
    return {t.task_id for t in tasks}


@pytest.mark.parametrize("family", ["general", "webshop", None])
@pytest.mark.parametrize("words", [True, False])
def test_a_selection_is_its_part_of_validation_split(family: str | None, words: bool) -> None:
    suffix = "_words" if words else ""
    fit, validation = load_tasks(family, f"fit{suffix}"), load_tasks(family, f"validation{suffix}")
    assert (fit, validation) == validation_split(family, words=words)
    assert fit and validation and _ids(fit).isdisjoint(_ids(validation))
    assert _ids(fit) | _ids(validation) == _ids(load_tasks(family, "train"))
    assert all(t.split == "train" for t in fit + validation)  # a task's split stays its real one
    assert all(family is None or t.family == family for t in fit + validation)


def test_every_validation_words_phrasing_the_general_fit_lacks_holds_a_new_word() -> None:
    def words(tasks: list) -> set[str]:
        return {w.lower() for t in tasks for w in split_words(t.instruction) if w.isalpha()}

    fit, validation = load_tasks("general", "fit_words"), load_tasks("general", "validation_words")
    new = words(validation) - words(fit)
    assert {"launch", "create"} <= new  # app-train-2's and alarm-train-1's own verbs
    # the phrasing-only split reuses the fit words (why the words split exists)
    old_fit, old_validation = load_tasks("general", "fit"), load_tasks("general", "validation")
    assert len(words(old_validation) - words(old_fit)) < len(new)


def test_a_selection_is_a_fresh_list_each_time() -> None:
    first = load_tasks("general", "fit_words")
    first.clear()  # a caller's change must not reach the next caller (the selection is cached)
    assert load_tasks("general", "fit_words")


def test_an_unknown_split_names_every_valid_one() -> None:
    with pytest.raises(ValueError) as raised:
        load_tasks("general", "validaton_words")
    assert all(repr(name) in str(raised.value) for name in SPLIT_CHOICES)
    assert ("train", "test", *SELECTIONS) == SPLIT_CHOICES


def test_an_environment_samples_from_a_selection() -> None:
    with pytest.raises(ValueError, match="validation_words"):
        SimDroidEnvConfig(split="valid")
    env = SimDroidEnv(
        SimDroidEnvConfig(family="general", split="validation_words", screenshots=False, seed=3)
    )
    held = _ids(load_tasks("general", "validation_words"))
    seen = set()
    for _ in range(20):
        env.reset()
        assert env.task is not None
        seen.add(env.task.task_id)
    assert seen <= held


def test_collectors_evaluators_and_warm_starts_take_the_selections_that_make_sense() -> None:
    assert CollectorParams(split="fit_words").split == "fit_words"
    assert EvaluatorParams(split="validation_words").protocol.startswith("validation_words:")
    with pytest.raises(ValidationError):
        EvaluatorParams(split="heldout")  # type: ignore[arg-type]
    assert WarmStartConfig(split="fit_words").split == "fit_words"
    for held_out in ("test", "validation_words"):  # demonstrations never come from held-out tasks
        with pytest.raises(ValueError, match=r"WarmStartConfig\.split"):
            WarmStartConfig(split=held_out)


def test_in_distribution_is_what_was_trained_on_beside_the_held_out_set() -> None:
    assert in_distribution_split("test") == "train"
    assert in_distribution_split("validation_words") == "fit_words"
    assert in_distribution_split("validation") == "fit"
    assert in_distribution_split("validation_unseen") == "fit_unseen"
    assert in_distribution_split("fit_words") == "fit_words"  # scored on trained tasks: nothing beside


@pytest.mark.parametrize("family", ["general", "webshop"])
def test_the_unseen_split_holds_out_parameters_as_well_as_phrasings(family: str) -> None:
    fit, validation = load_tasks(family, "fit_unseen"), load_tasks(family, "validation_unseen")
    assert (fit, validation) == unseen_split(family)
    assert fit and validation and _ids(fit) <= _ids(load_tasks(family, "train"))
    fit_templates = {t.params["template"] for t in fit}
    fit_parameters = {(t.kind, PARAMETER_OF[t.kind](t.params)) for t in fit}
    for task in validation:
        # each is a train task rephrased: its phrasing and its app/query/time/... are both unseen
        assert task.task_id.endswith("-unseen") and get_task(task.task_id) == task
        original = get_task(task.task_id.removesuffix("-unseen"))
        assert original.split == task.split == "train" and original.kind == task.kind
        assert task.params["template"] not in fit_templates
        assert (task.kind, PARAMETER_OF[task.kind](task.params)) not in fit_parameters
        assert {k: v for k, v in task.params.items() if k != "template"} == {
            k: v for k, v in original.params.items() if k != "template"
        }
    assert len({t.instruction for t in validation}) == len(validation)


def test_an_unseen_validation_task_is_phrased_by_its_held_template() -> None:
    by_id = dict(TRAIN_TEMPLATES)
    for task in load_tasks("general", "validation_unseen"):
        pattern = re.escape(by_id[task.params["template"]])
        pattern = re.sub(r"\\\{[^}]*\\\}", ".+", pattern)  # each {field} matches its value
        assert re.fullmatch(pattern, task.instruction), (task.params["template"], task.instruction)
    app = next(t for t in load_tasks("general", "validation_unseen") if t.kind == "open_app")
    assert app.params["app"] in app.instruction
