"""Typed instructions read as SimDroid tasks (simulators/simdroid/free_text.py, free_task.py,
free_numbers.py): every kind, tricky phrasings, refusals that say why, the generator's own
parameters for its own texts, and tasks the rules judge as they judge generated ones."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from simulators.simdroid.catalog import first_product
from simulators.simdroid.expert import expert_action
from simulators.simdroid.free_numbers import clock_time, percent
from simulators.simdroid.free_task import FREE_TEMPLATE, KINDS, free_task, instruction_task, make_task
from simulators.simdroid.free_text import NotParsed, Parsed, parse_instruction
from simulators.simdroid.tasks import load_tasks, unseen_split

PHRASINGS = Path(__file__).resolve().parents[2] / "bench" / "data" / "free_phrasings.jsonl"


@pytest.mark.parametrize(
    ("text", "kind", "params"),
    [
        ("Could you bring up the gallery of pictures", "open_app", {"app": "Photos"}),
        ("Open Spotify's rival, the Music app", "open_app", {"app": "Music"}),
        ("please open gmail on my phone", "open_app", {"app": "Gmail"}),
        ("Show my location on the map", "open_app", {"app": "Maps"}),  # "on" here is no switch
        ("Open the Wi-Fi settings", "open_app", {"app": "Settings"}),  # a setting named, no on/off
        ("Calculator", "open_app", {"app": "Calculator"}),
        ("Run an internet search: best pizza in rome", "web_search", {"query": "best pizza in rome"}),
        ("search the web: cheapest flights to oslo", "web_search", {"query": "cheapest flights to oslo"}),
        ("Search for how to turn on bluetooth", "web_search", {"query": "how to turn on bluetooth"}),
        ("look the capital of peru up", "web_search", {"query": "the capital of peru"}),
        ("Google “tallest building in Asia” for me", "web_search", {"query": "tallest building in asia"}),
        ("I need an alarm at 7:15 AM", "set_alarm", {"hour": 7, "minute": 15}),
        ("wake me up at 0630", "set_alarm", {"hour": 6, "minute": 30}),
        ("Alarm at quarter to one pm", "set_alarm", {"hour": 12, "minute": 45}),
        ("set an alarm for 12:05 am", "set_alarm", {"hour": 0, "minute": 5}),
        ("Alarm for twenty five past eleven at night", "set_alarm", {"hour": 23, "minute": 25}),
        ("turn wifi on", "toggle_setting", {"setting": "wifi", "on": True}),
        ("Turn on Do Not Disturb", "toggle_setting", {"setting": "dnd", "on": True}),  # "not" is its name
        ("I'd rather have mobile data disabled", "toggle_setting", {"setting": "mobile_data", "on": False}),
        ("go into airplane mode", "toggle_setting", {"setting": "airplane", "on": True}),
        ("Turn the brightness down to 20", "set_brightness", {"percent": 20}),
        ("brightness: full", "set_brightness", {"percent": 100}),
        ("Search shopmart.com for running shoes", "shop_search", {"site": "shopmart.com", "query": "running shoes"}),
        ("ShopMart: search for tent", "shop_search", {"site": "shopmart.com", "query": "tent"}),
        ("browse to Trend Bay", "shop_open_site", {"site": "trendbay.com"}),
        ("I want to buy dumbbells from trend bay", "shop_add_to_cart", {"site": "trendbay.com", "query": "dumbbells"}),
    ],
)  # fmt: skip
def test_free_text_is_read_as_the_kind_and_parameters_it_asks_for(text, kind, params):
    assert parse_instruction(text) == Parsed(kind, params)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Make me a sandwich", "I recognise no SimDroid task in it: no app to open, setting to switch"),
        ("   ", "the instruction is empty"),
        ("Open Spotify", "'spotify' is no app SimDroid has (its apps: Settings, Clock"),
        ("Turn on the flashlight", "SimDroid has no switch for (its switches: Wi-Fi, airplane mode"),
        ("Set an alarm", "an alarm but gives no time of day I can read (e.g. 7:15 AM"),
        ("Wake me at 25:10", "no time of day I can read"),
        ("Search", "a search but not for what"),
        ("Open Photos and Maps", "it names 2 apps (Photos, Maps); a SimDroid task opens one"),
        (
            "turn off wifi and bluetooth",
            "it names 2 settings (Wi-Fi, Bluetooth); a SimDroid task switches one",
        ),
        ("toggle bluetooth", "it names Bluetooth but says neither on nor off"),
        ("Set brightness to 150%", "brightness 150% is no level: give 0-100%"),
        ("brightness up", "brightness but names no level"),
        ("Go to amazon.com", "SimDroid has no site 'amazon.com' (its shops: shopmart.com"),
        (
            "Add the first result to my cart on shopmart.com",
            "in the cart at shopmart.com but names no product",
        ),
        ("What is the weather in Paris", "it names Weather but not what to do with it"),
    ],
)
def test_what_cannot_be_read_says_what_is_missing(text, reason):
    found = parse_instruction(text)
    assert isinstance(found, NotParsed) and reason in found.reason, found


@pytest.mark.parametrize(
    ("text", "time"),
    [
        ("7:15 am", (7, 15)), ("7.15 pm", (19, 15)), ("19h05", (19, 5)), ("half past seven", (7, 30)),
        ("half seven", (7, 30)), ("quarter to eight in the evening", (19, 45)), ("quarter to 12 am", (23, 45)),
        ("six oh five", (6, 5)), ("at 6 pm", (18, 0)), ("at 12 pm", (12, 0)), ("noon", (12, 0)),
        ("midnight", (0, 0)), ("at 7 o'clock", (7, 0)), ("seven thirty in the morning", (7, 30)),
        ("I am up at 9", (9, 0)), ("at 13:00 pm", (13, 0)), ("7:75", None), ("for 5 minutes", None), ("soon", None),
    ],
)  # fmt: skip
def test_clock_times(text, time):
    assert clock_time(text) == time


@pytest.mark.parametrize(
    ("text", "level"),
    [("40%", 40), ("forty five percent", 45), ("15 per cent", 15), ("to 70", 70), ("half", 50),
     ("maximum", 100), ("a hundred percent", 100), ("at 7 am", None), ("brighter", None)],
)  # fmt: skip
def test_percentages(text, level):
    assert percent(text) == level


def _named(task) -> dict:
    return {k: v for k, v in task.params.items() if k not in ("template", "setup")}


def test_every_generated_text_is_read_as_the_generator_made_it():
    """The parser reads each generated instruction (train, test, the unseen-template validation) as
    the task the generator made: the same kind and parameters, product and start state included."""
    for task in [*load_tasks(), *unseen_split()[1]]:
        parsed = parse_instruction(task.instruction)
        assert isinstance(parsed, Parsed), (task.instruction, parsed)
        made = make_task(task.instruction, parsed.kind, parsed.params)
        assert (made.kind, made.family, made.horizon) == (task.kind, task.family, task.horizon)
        assert _named(made) == _named(task), task.instruction
        if task.kind in ("toggle_setting", "set_brightness"):  # the start state: the opposite, or far off
            assert made.params["setup"] == task.params["setup"]


def test_a_typed_task_is_built_on_the_fly_as_the_generator_would():
    task = free_task("put the first 'phone case' from shopmart.com in my basket")
    product = first_product("shopmart.com", "phone case")
    assert task.kind == "shop_add_to_cart" and task.family == "webshop" and task.horizon == 20
    assert dict(task.params) == {
        "site": "shopmart.com", "query": "phone case", "level": 3, "template": FREE_TEMPLATE,
        "product_id": product.product_id, "product_name": product.name,
    }  # fmt: skip
    assert task.task_id.startswith("webshop-free-") and task.split == "test"
    assert task.task_id not in {t.task_id for t in load_tasks()}
    alarm = free_task("I need an alarm at 7:15 AM")
    assert alarm.params["setup"] == {"alarms": [{"hour": 10, "minute": 0, "enabled": True}]}
    assert free_task("Make me a sandwich") == parse_instruction("Make me a sandwich")


@pytest.mark.parametrize(
    ("kind", "params", "message"),
    [
        ("open_app", {"app": "Spotify"}, "open_app: SimDroid has no app 'Spotify'; its apps: Settings"),
        ("set_alarm", {"hour": 24, "minute": 0}, "hour must be 0-23 and minute 0-59"),
        ("set_alarm", {"hour": 7}, "set_alarm needs the parameters ['hour', 'minute']; ['minute'] missing"),
        ("toggle_setting", {"setting": "wifi", "on": "yes"}, "on true or false"),
        ("set_brightness", {"percent": 101}, "percent must be 0-100"),
        (
            "shop_search",
            {"site": "amazon.com", "query": "tent"},
            "no shop 'amazon.com'; its shops: shopmart.com",
        ),
        ("web_search", {"query": "  "}, "the query is empty"),
        ("send_email", {}, "unknown task kind 'send_email'"),
    ],
)
def test_bad_parameters_are_refused_with_the_fix(kind, params, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make_task("some text", kind, params)


def _phrasings() -> list[dict]:
    return [json.loads(line) for line in PHRASINGS.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_free_phrasings_are_read_as_written():
    """The held-back phrasings (bench/free_phrasings.py scores policies on them) parse to the
    parameters written beside each; every General kind and a few Web Shopping ones are there."""
    rows = _phrasings()
    assert 60 <= len(rows) <= 100 and set(KINDS) <= {r["kind"] for r in rows}
    misread = [r["text"] for r in rows if parse_instruction(r["text"]) != Parsed(r["kind"], r["params"])]
    assert not misread


def test_the_rules_judge_a_typed_task_as_a_generated_one():
    """The scripted expert solves every free phrasing's task on SimDroid and the rules say so;
    before it acts, the start state is not already the goal."""
    env = SimDroidEnv(SimDroidEnvConfig(screenshots=False, ui_xml=False))
    for row in _phrasings():
        task = make_task(row["text"], row["kind"], row["params"])
        env.reset(task, seed=0)
        assert not env.device.is_successful(task), row["text"]
        for _ in range(task.horizon):
            result = env.step(expert_action(env, task))
            if result.done:
                break
        assert result.info.success and env.device.is_successful(task), row["text"]


def test_text_no_rule_reads_plays_to_its_horizon_and_is_never_judged_done():
    env = SimDroidEnv(SimDroidEnvConfig(screenshots=False, ui_xml=False))
    task = instruction_task("Make me a sandwich", "I recognise no SimDroid task in it")
    env.reset(task, seed=0)
    steps = [env.step("key(HOME)") for _ in range(task.horizon)]
    assert [s.done for s in steps] == [False] * (task.horizon - 1) + [True]
    assert not any(s.info.success for s in steps) and steps[-1].truncated


def test_the_rules_say_no_verdict_is_possible_for_text_they_cannot_read():
    from distrl_core.evaluators import EpisodeContext, Verdict
    from simulators.sim_rules import SimStateEvaluator
    from simulators.simdroid import SimDroid

    device = SimDroid()
    task = instruction_task("Make me a sandwich", "it names no app")
    device.load_task(task, seed=0)
    result = SimStateEvaluator(device).evaluate(EpisodeContext(task.instruction, task=task))
    assert (result.verdict, result.reason) == (
        Verdict.UNKNOWN,
        "no verdict possible for this text: it names no app",
    )
