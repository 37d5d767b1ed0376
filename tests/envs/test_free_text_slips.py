"""Typing slips and loose phrasings read as the task meant (simulators/simdroid/free_text.py,
free_spelling.py, free_numbers.py), and the same texts read by nothing else."""

from __future__ import annotations

import pytest

from simulators.simdroid.free_numbers import clock_time
from simulators.simdroid.free_spelling import slips, spelled
from simulators.simdroid.free_text import NotParsed, Parsed, parse_instruction


@pytest.mark.parametrize(
    ("text", "kind", "params"),
    [
        # slips in the parser's own words: swapped, dropped, doubled or changed letters
        ("lanuch the camera", "open_app", {"app": "Camera"}),
        ("oepn calendar", "open_app", {"app": "Calendar"}),
        ("open the calcualtor", "open_app", {"app": "Calculator"}),
        ("trun on wifi", "toggle_setting", {"setting": "wifi", "on": True}),
        ("switch on bluetoth", "toggle_setting", {"setting": "bluetooth", "on": True}),
        ("serach for vegan lasagna", "web_search", {"query": "vegan lasagna"}),
        ("gogle best hiking boots", "web_search", {"query": "best hiking boots"}),
        ("googel how to tie a bowtie", "web_search", {"query": "how to tie a bowtie"}),
        # "of" for "off" where a switch's state goes
        ("switch wifi of", "toggle_setting", {"setting": "wifi", "on": False}),
        ("turn of location", "toggle_setting", {"setting": "location", "on": False}),
        ("please turn dark mode of now", "toggle_setting", {"setting": "dark_theme", "on": False}),
        # times with am/pm stuck to them, getting up as an alarm
        ("alarm at 6:30pm", "set_alarm", {"hour": 18, "minute": 30}),
        ("wake me at 7:05AM", "set_alarm", {"hour": 7, "minute": 5}),
        ("I have to be up by 5 in the morning, set an alarm", "set_alarm", {"hour": 5, "minute": 0}),
        ("we need to get up at 7:20 tomorrow", "set_alarm", {"hour": 7, "minute": 20}),
        # queries lose trailing punctuation and pleasantries, phrasal "up"
        ("search for cheap flights to rome, thank you", "web_search", {"query": "cheap flights to rome"}),
        ("google lemon cake recipe! thanks a lot", "web_search", {"query": "lemon cake recipe"}),
        ("search for thanks giving dinner ideas", "web_search", {"query": "thanks giving dinner ideas"}),
        ("look up train times to leeds please.", "web_search", {"query": "train times to leeds"}),
        ("search up pottery classes", "web_search", {"query": "pottery classes"}),
        ("search up for pottery classes", "web_search", {"query": "pottery classes"}),
        # shops: "show me X on site" searches, "the first X" names X
        ("show me desk lamps on shopmart.com", "shop_search", {"site": "shopmart.com", "query": "desk lamps"}),
        ("show me a yoga mat at trendbay", "shop_search", {"site": "trendbay.com", "query": "yoga mat"}),
        ("add the first usb cable from trendbay to my cart", "shop_add_to_cart",
         {"site": "trendbay.com", "query": "usb cable"}),
    ],
)  # fmt: skip
def test_slips_and_loose_phrasings_are_read_as_meant(text, kind, params):
    assert parse_instruction(text) == Parsed(kind, params)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("turn bluetooth off", Parsed("toggle_setting", {"setting": "bluetooth", "on": False})),
        ("turn off wifi", Parsed("toggle_setting", {"setting": "wifi", "on": False})),
        ("turn on the location of my phone", Parsed("toggle_setting", {"setting": "location", "on": True})),
        (
            "search for the best use of bluetooth",
            Parsed("web_search", {"query": "the best use of bluetooth"}),
        ),
        # a query keeps what the parser's words resemble: only words before the search verb are put right
        ("search for oven gloves", Parsed("web_search", {"query": "oven gloves"})),
        ("googel opne source maps", Parsed("web_search", {"query": "opne source maps"})),
        ("search for thanks", Parsed("web_search", {"query": "thanks"})),
    ],
)
def test_no_false_readings(text, expected):
    assert parse_instruction(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("the state of wifi", "it names Wi-Fi but says neither on nor off"),
        ("make me a sandwich at 7", "no app"),  # "make" is no slip of "wake"
        ("show me my cart on shopmart.com", None),
        ("Add the first result to my cart on shopmart.com", "names no product"),
    ],
)
def test_slips_do_not_make_tasks_of_other_text(text, reason):
    found = parse_instruction(text)
    if reason is None:
        assert not (isinstance(found, Parsed) and found.kind == "shop_add_to_cart"), found
    else:
        assert isinstance(found, NotParsed) and reason in found.reason, found


def test_slips_counts_swaps_as_one_edit():
    assert slips("opne", "open", 1) == 1 and slips("googel", "google", 1) == 1
    assert slips("bluetoth", "bluetooth", 2) == 1 and slips("abcdef", "uvwxyz", 2) == 3


def test_spelled_puts_right_only_the_parsers_words_before_a_query():
    words = {"open", "search", "clock", "wake"}
    assert spelled("opne the clokc", words) == "open the clock"
    assert spelled("make me a sandwich", words) == "make me a sandwich"  # 4 letters: swaps only
    assert spelled("serach opne clokc", words) == "search opne clokc"
    assert spelled("'opne' clokc", words) == "'opne' clokc"


@pytest.mark.parametrize(
    ("text", "time"),
    [
        ("5:45am", (5, 45)),
        ("11:10pm", (23, 10)),
        ("12:30am", (0, 30)),
        ("7.15pm", (19, 15)),
        ("10:455", None),
    ],
)
def test_times_with_am_pm_written_on(text, time):
    assert clock_time(text) == time
