"""bench.typing_candidates: the development phrasings are a tuning set of every kind, a field takes
typed text as the simulator does, recall is counted per task, and the generator's instructions get
the typing candidates they got before free-phrasing spans (so the demo's candidate sets are
unchanged)."""

from __future__ import annotations

import pytest

from bench.free_phrasings import load_phrasings
from bench.typing_candidates import DEV, changed_generated_instructions, measure, takes_as_same
from simulators.simdroid.free_task import KINDS, make_task


def test_the_development_phrasings_cover_every_kind():
    phrasings = load_phrasings(DEV.read_text(encoding="utf-8").splitlines(), str(DEV))
    assert 80 <= len(phrasings) <= 120
    assert {p.kind for p in phrasings} == set(KINDS)
    assert sum(p.family == "webshop" for p in phrasings) >= 10


@pytest.mark.parametrize(
    ("field", "typed", "needed", "same"),
    [
        ("clock.hour", "07", "7", True),
        ("clock.minute", "5", "05", True),
        ("clock.minute", "15", "16", False),
        ("clock.hour", "seven", "7", False),
        ("chrome.url", "www.ShopMart.com", "shopmart.com", True),
        ("chrome.url", "Best  Ramen", "best ramen", True),
        ("chrome.url", "best ramen please", "best ramen", False),
        ("shopmart.search", "www.tent", "tent", False),  # only the URL bar drops "www."
    ],
)  # fmt: skip
def test_a_field_takes_typed_text_as_the_simulator_reads_it(field, typed, needed, same):
    assert takes_as_same(field, typed, needed) is same


def test_recall_counts_a_task_covered_only_when_every_typing_step_is():
    tasks = [
        make_task("wake me at 6.30", "set_alarm", {"hour": 6, "minute": 30}),
        make_task("open the calculator", "open_app", {"app": "Calculator"}),
        make_task("Set an alarm for 7:15 AM", "set_alarm", {"hour": 7, "minute": 15}),
        make_task("visit trend bay", "shop_open_site", {"site": "trendbay.com"}),  # no address to type
    ]
    result = measure(tasks)
    alarm = result["per_kind"]["set_alarm"]
    assert (alarm["typing_tasks"], alarm["recall_before"], alarm["recall_after"]) == (2, 0.5, 1.0)
    assert result["per_kind"]["open_app"] == {
        "tasks": 1,
        "typing_tasks": 0,
        "recall_before": None,
        "recall_after": None,
    }
    assert result["per_kind"]["shop_open_site"]["recall_after"] == 0.0
    assert [m["instruction"] for m in result["misses_after"]] == ["visit trend bay"]
    assert result["candidates_per_step"]["after"]["typing"]["max"] == 2


def test_no_generated_instruction_changes_its_typing_candidates():
    assert changed_generated_instructions() == {"instructions": 380, "changed": 0}
