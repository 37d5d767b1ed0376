"""The validation split that holds out words: `validation_split(words=True)` and the tiny
vocabulary built from its fit tasks (`PolicyConfig.vocabulary="fit_words"`)."""

from __future__ import annotations

import re

import pytest

from simulators.simdroid.task_text import (
    ALARM_TEMPLATES,
    APP_TEMPLATES,
    BRIGHTNESS_TEMPLATES,
    SEARCH_TEMPLATES,
    SHOP_TEMPLATES,
    TOGGLE_TEMPLATES,
)
from simulators.simdroid.tasks import load_tasks, validation_split, word_holdout_templates

TRAIN_TEMPLATES = dict(
    APP_TEMPLATES["train"] + TOGGLE_TEMPLATES["train"] + ALARM_TEMPLATES["train"]
    + SEARCH_TEMPLATES["train"] + BRIGHTNESS_TEMPLATES["train"]
    + [t for level in SHOP_TEMPLATES["train"].values() for t in level]
)  # fmt: skip
COMMON = {"a", "an", "the", "to", "for", "of", "in", "at", "on", "and", "or", "is", "it", "my", "me", "i", "you", "your", "up"}  # fmt: skip


def _words(template: str) -> set[str]:
    return set(re.findall(r"[a-z]+", re.sub(r"\{[^}]*\}", " ", template).lower())) - COMMON


@pytest.mark.parametrize("family", ["general", "webshop"])
def test_validation_words_is_carved_from_train_and_leaves_test_alone(family):
    fit, validation = validation_split(family, words=True)
    train = load_tasks(family, "train")
    assert len(fit) + len(validation) == len(train) and fit and validation
    assert {t.task_id for t in fit}.isdisjoint(t.task_id for t in validation)
    assert all(t.split == "train" for t in fit + validation)
    held = {t.params["template"] for t in validation}
    assert held <= set(word_holdout_templates())
    assert not {t.params["template"] for t in fit} & held
    assert load_tasks(family, "test") == [t for t in load_tasks(family) if t.split == "test"]


def test_held_out_templates_have_words_no_fit_template_has():
    fit_words = set().union(
        *(_words(text) for tid, text in TRAIN_TEMPLATES.items() if tid not in word_holdout_templates())
    )
    with_new_words = [tid for tid in word_holdout_templates() if _words(TRAIN_TEMPLATES[tid]) - fit_words]
    # every kind but one (Web Shopping's level 2, whose templates share all their words) holds one out
    assert len(with_new_words) == len(word_holdout_templates()) - 1
    assert "shop2-train-0" in word_holdout_templates()


@pytest.mark.slow
def test_the_fit_words_vocabulary_leaves_validation_words_unknown():
    from distrl_core.policy import Policy, PolicyConfig
    from distrl_core.policy.tokenizer import split_words

    _, validation = validation_split("general", words=True)
    words = {w for t in validation for w in split_words(t.instruction)}
    tiny = Policy.create(PolicyConfig(vocabulary="fit_words")).tokenizer
    default = Policy.create(PolicyConfig()).tokenizer
    unknown = {w for w in words if tiny.convert_tokens_to_ids(w) == tiny.unk_token_id}
    assert {"launch", "create"} <= unknown  # app-train-2 and alarm-train-1's own verbs
    assert all(default.convert_tokens_to_ids(w) != default.unk_token_id for w in words)
