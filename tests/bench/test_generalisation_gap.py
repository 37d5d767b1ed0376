"""The generalisation-gap bench names a failed episode's first wrong action by what the scripted
expert would have done and what the policy did instead."""

from __future__ import annotations

import pytest

from bench._gap_episodes import CATEGORIES, classify, param_value
from distrl_core.envs.actions import Action
from simulators.simdroid.tasks import load_tasks


@pytest.mark.parametrize(
    ("expected", "chosen", "category"),
    [
        (Action.tap(3), Action.tap(5), "grounding"),
        (Action.tap(point=(0.5, 0.4)), Action.tap(point=(0.2, 0.4)), "slider_value"),
        (Action.type_text("14"), Action.type_text("2"), "typed_text"),
        (Action.type_text("14"), Action.tap(2), "type_vs_tap"),
        (Action.tap(2), Action.type_text("weather"), "type_vs_tap"),
        (Action.tap(2), Action.complete(), "stopped_early"),
        (Action.swipe("left"), Action.tap(1), "navigation"),
        (Action.tap(1), Action.press("HOME"), "navigation"),
    ],
)
def test_a_deviation_is_named_by_both_actions(expected, chosen, category):
    assert classify(expected, chosen) == category
    assert category in CATEGORIES


def test_every_general_task_has_a_parameter_value_to_compare():
    values = {(t.kind, param_value(t)) for t in load_tasks("general")}
    assert all(value for _, value in values)
    # held-out test parameters differ from the train ones (what "seen" vs "unseen" relies on)
    train = {(t.kind, param_value(t)) for t in load_tasks("general", "train")}
    test = {(t.kind, param_value(t)) for t in load_tasks("general", "test")}
    assert not train & test
