"""Candidates are a pure function of (instruction, compact UI text) that covers what the expert does."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distrl_core.envs.actions import Action, format_action
from distrl_core.envs.observation import UIElement, compact_tree
from distrl_core.policy.candidates import build_candidates, instruction_spans, parse_compact_tree
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from simulators.simdroid.device import SimDroidConfig
from simulators.simdroid.expert import expert_action
from simulators.simdroid.tasks import load_tasks


def test_expert_actions_are_candidates_rebuilt_from_the_stored_text_alone():
    env = SimDroidEnv(SimDroidEnvConfig(device=SimDroidConfig(distractor_prob=0.3), screenshots=False))
    tasks = load_tasks()[::9]
    checked = 0
    for task in tasks:
        observation = env.reset(task, seed=7)
        for _ in range(task.horizon):
            action = expert_action(env, task)
            # Only the row's two strings go in, as when the learner reads a Parquet row.
            stored_instruction, stored_text = str(observation.instruction), str(observation.ui_text)
            texts = [c.action_text for c in build_candidates(stored_instruction, stored_text)]
            assert format_action(action) in texts, (task.instruction, observation.ui_text, action)
            checked += 1
            result = env.step(action)
            observation = result.observation
            if result.done:
                break
    assert checked > 100


def test_candidates_are_deterministic_and_unique():
    elements = (
        UIElement(0, text="Wi-Fi", class_name="android.widget.Switch", clickable=True, checkable=True),
        UIElement(1, text="Network", class_name="android.widget.TextView"),
        UIElement(
            2, text="", class_name="android.widget.EditText", clickable=True, editable=True, focused=True
        ),
    )
    text = compact_tree(elements)
    first = build_candidates('Search for "x y" on shop.com', text)
    second = build_candidates('Search for "x y" on shop.com', text)
    assert first == second
    actions = [c.action_text for c in first]
    assert len(actions) == len(set(actions))
    assert "tap(1)" not in actions  # a static label is context, not a candidate
    assert {"tap(0)", "tap(2)", 'type("x y")', 'type("shop.com")', "key(BACK)", "status(complete)"} <= set(
        actions
    )


def test_type_candidates_need_a_focused_field():
    unfocused = compact_tree(
        (UIElement(0, class_name="android.widget.EditText", clickable=True, editable=True),)
    )
    texts = [c.action_text for c in build_candidates('Search for "tea"', unfocused)]
    assert not any(t.startswith("type(") for t in texts)


def test_instruction_spans():
    assert instruction_spans('Open megastore.com and search for "usb-c cable"') == [
        ("text", "usb-c cable"),
        ("address", "megastore.com"),
    ]
    assert instruction_spans("Wake me up at 7:05 PM") == [("hour", "19"), ("minute", "5")]
    assert instruction_spans("Set alarm 00:30") == [("hour", "0"), ("minute", "30")]
    assert instruction_spans("Look up weather in paris") == [("query", "weather in paris")]


def test_slider_candidates_tap_the_percentage_the_instruction_names():
    slider = UIElement(
        0, text="20%", class_name="android.widget.SeekBar", clickable=True, bounds=(40, 592, 1040, 712)
    )
    candidates = build_candidates(
        "Set the brightness to 85%", compact_tree((slider,)), screen_size=(1080, 2400)
    )
    taps = [c.action for c in candidates if c.action.point is not None]
    assert len(taps) == 1
    x, y = taps[0].point
    assert abs(x * 1080 - (40 + 0.85 * 999 + 0.5)) < 0.5
    assert abs(y * 2400 - 652) < 0.5


@pytest.mark.parametrize(
    ("instruction", "expected"),
    [
        ("Dim the screen to forty per cent", [40]),
        ("brightness to 70 please", [70]),
        ("Put the brightness at max", [100]),
        ("Half brightness, and 30% if that fails", [30, 50]),
        ("Set brightness to 150%", []),  # no level: a slider has no point past its end
    ],
)
def test_slider_candidates_read_the_levels_people_type(instruction: str, expected: list[int]):
    slider = UIElement(0, class_name="android.widget.SeekBar", clickable=True, bounds=(40, 592, 1040, 712))
    candidates = build_candidates(instruction, compact_tree((slider,)), screen_size=(1080, 2400))
    xs = sorted(c.action.point[0] for c in candidates if c.action.point is not None)
    assert [round((x * 1080 - 40 - 0.5) / 999 * 100) for x in xs] == expected


def test_parse_compact_tree_reads_back_compact_tree():
    rng = random.Random(0)
    elements = tuple(
        UIElement(
            i,
            text=rng.choice(["OK", 'say "hi"', "Cart (0)", "", "a\nb"]),
            class_name=rng.choice(["android.widget.Button", "android.widget.Switch"]),
            bounds=(i, i + 1, i + 50, i + 60),
            clickable=rng.random() < 0.5,
            checkable=rng.random() < 0.5,
            checked=rng.random() < 0.5,
            focused=rng.random() < 0.2,
        )
        for i in range(30)
    )
    lines = parse_compact_tree(compact_tree(elements))
    assert [line.index for line in lines] == list(range(30))
    assert [line.bounds for line in lines] == [el.bounds for el in elements]
    assert all(
        line.static == (not el.clickable and not el.checkable)
        for line, el in zip(lines, elements, strict=True)
    )


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80), st.text(max_size=300))
def test_any_text_gives_valid_unique_candidates(instruction, ui_text):
    candidates = build_candidates(instruction, ui_text)
    texts = [c.action_text for c in candidates]
    assert len(texts) == len(set(texts))
    assert all(isinstance(c.action, Action) and c.action.is_valid for c in candidates)
    assert "key(HOME)" in texts
