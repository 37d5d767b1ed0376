"""Typing candidates for free instructions: the time, query, product and site a person names are
offered in the form the field needs, and the generator's instructions get exactly what they got."""

from __future__ import annotations

import pytest

from distrl_core.envs.observation import UIElement, compact_tree
from distrl_core.policy.candidates import build_candidates, instruction_spans
from distrl_core.policy.typing_spans import MAX_QUERIES, address_guesses, free_time, query_spans


@pytest.mark.parametrize(
    ("instruction", "time"),
    [
        ("wake me tomorrow at 5.15", (5, 15)),
        ("alarm for 6:40am", (6, 40)),
        ("alarm at 8pm please", (20, 0)),
        ("set an alarm, ten past nine", (9, 10)),
        ("need an alarm at quarter to six", (5, 45)),
        ("alarm at quarter to one pm", (12, 45)),
        ("wake me at half seven", (7, 30)),
        ("wake me at eight fifteen in the evening", (20, 15)),
        ("wake me at 7 o'clock", (7, 0)),
        ("set an alarm for 0545", (5, 45)),
        ("alarm at 20h15", (20, 15)),
        ("alarm for midnight", (0, 0)),
        ("alarm at 12 am", (0, 0)),
        ("alarm at 12 pm", (12, 0)),
        ("wake me up at six in the morning", (6, 0)),
        ("remind me at 9 tonight", (21, 0)),
        ("meeting at 14:30", (14, 30)),  # h:mm is a time with or without a cue
    ],
)  # fmt: skip
def test_free_times_read_to_the_24_hour_clock(instruction, time):
    assert free_time(instruction) == time


@pytest.mark.parametrize(
    "instruction",
    ["search for iphone 7.15 update", "brightness to 40", "wake me up in 8 hours", "alarm at 25:10", "set an alarm"],
)  # fmt: skip
def test_no_time_without_a_cue_or_outside_the_clock(instruction):
    assert free_time(instruction) is None


@pytest.mark.parametrize(
    ("instruction", "wanted"),
    [
        ("google cheap flights to oslo", "cheap flights to oslo"),
        ("look up the tallest bridge in europe on the internet", "the tallest bridge in europe"),
        ("could you search the web for vegan brownies please?", "vegan brownies"),
        ("look the tide times up", "the tide times"),
        ("search: sunrise in reykjavik", "sunrise in reykjavik"),
        ("find me some info on electric scooters", "electric scooters"),
        ("what does the web say about intermittent fasting", "intermittent fasting"),
        ("bing how to fold a fitted sheet, thanks", "how to fold a fitted sheet"),
        ("gogle tapas bars nearby", "tapas bars nearby"),
        ("search up flights to madrid", "flights to madrid"),
        ("buy a pair of sandals on trendbay", "pair of sandals"),
        ("find a standing desk at buyzilla", "standing desk"),
        ("search gizmohub for a tripod", "tripod"),
        ("put the top result for laptop sleeve in my cart", "laptop sleeve"),
        ("order two pillows from cartwheel.com", "two pillows"),
    ],
)  # fmt: skip
def test_queries_and_products_as_typed(instruction, wanted):
    queries = query_spans(instruction)
    assert wanted in queries
    assert len(queries) <= MAX_QUERIES


@pytest.mark.parametrize(
    "instruction",
    [
        "add an alarm for 7 am",  # a buying verb outside shopping names no product
        "put the phone on silent",
        "find it",
        "open the calendar",
    ],
)
def test_no_query_where_none_is_named(instruction):
    assert query_spans(instruction) == []


@pytest.mark.parametrize(
    ("instruction", "guesses"),
    [
        ("go to megastore", ["megastore.com"]),
        ("check out the gizmohub website", ["gizmohub.com"]),
        ("browse shopmart for lamps", ["shopmart.com"]),
        ("get me a kettle from buyzilla", ["buyzilla.com"]),
        ("search for a rug on cartwheel", ["cartwheel.com"]),
        ("search for a rug on cartwheel.com", []),  # the address is written: no guess beside it
        ("switch on bluetooth", []),  # "on X" names a site only in shopping or searching
        ("open the play store", []),
        ("search online for umbrellas", []),
    ],
)  # fmt: skip
def test_sites_named_without_their_address(instruction, guesses):
    assert address_guesses(instruction) == guesses


def test_single_quotes_are_typed_as_written_and_apostrophes_are_not_quotes():
    assert instruction_spans("google 'best hiking boots'") == [("text", "best hiking boots")]
    assert ("query", "santa's village") in instruction_spans("look up santa's village")


@pytest.mark.parametrize(
    ("instruction", "spans"),
    [
        ('Open megastore.com and search for "usb-c cable"', [("text", "usb-c cable"), ("address", "megastore.com")]),
        ("Wake me up at 7:05 PM", [("hour", "19"), ("minute", "5")]),
        ("Set alarm 00:30", [("hour", "0"), ("minute", "30")]),
        ("Schedule a wake-up alarm for 19:05", [("hour", "19"), ("minute", "5")]),
        ('Find "tent" on shopmart.com', [("text", "tent"), ("address", "shopmart.com")]),
        ("Open Calendar", []),
        ("Launch Play Store", []),
        ("Switch on Wi-Fi", []),
        ("Add an alarm for 8:00 AM", [("hour", "8"), ("minute", "0")]),
    ],
)  # fmt: skip
def test_generated_instructions_keep_their_spans(instruction, spans):
    assert instruction_spans(instruction) == spans


def test_a_free_alarm_puts_its_hour_and_minute_among_the_candidates_of_a_focused_field():
    field = UIElement(0, class_name="android.widget.EditText", clickable=True, editable=True, focused=True)
    texts = [c.action_text for c in build_candidates("wake me at quarter past six", compact_tree((field,)))]
    assert {'type("6")', 'type("15")'} <= set(texts)


@pytest.mark.parametrize(
    ("instruction", "query"),
    [
        ("google best tacos in austin thx", "best tacos in austin"),
        ("search up the nearest pharmacy cheers", "the nearest pharmacy"),
        ("look up bus times, thank you so much", "bus times"),
        ("search for thanks giving recipes", "thanks giving recipes"),  # a "thanks" inside stays
        ("put the first phone case from trendbay in my basket", "phone case"),
    ],
)
def test_queries_lose_trailing_pleasantries_and_phrasal_up(instruction, query):
    assert query_spans(instruction)[0] == query
