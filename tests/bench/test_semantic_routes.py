"""bench.semantic_routes: the expert's route for a phrasing's task, the right path of a scope for it,
and the held-back phrasings never read."""

from __future__ import annotations

import pytest

from bench.free_phrasings import DATA, Phrasing
from bench.semantic_routes import _expert_routes, main, right_path

SCOPE = [
    ("Settings",),
    ("Chrome",),
    ("Translate",),
    ("Settings", "Display"),
    ("Settings", "Display", "Brightness"),
    ("Chrome", "Search or type web address"),
]


def test_the_right_path_is_the_deepest_the_route_starts_with():
    assert right_path(SCOPE, ["Settings", "Display", "Brightness"]) == ("Settings", "Display", "Brightness")
    assert right_path(SCOPE[:4], ["Settings", "Display", "Brightness"]) == ("Settings", "Display")
    assert right_path(SCOPE, ["chrome", "search or type web address"]) == SCOPE[-1]  # case aside
    assert right_path(SCOPE, ["Translate"]) == ("Translate",)
    assert right_path(SCOPE, ["Clock", "Add alarm"]) is None
    assert right_path(SCOPE, []) is None


def test_the_expert_routes_run_through_the_control_and_past_a_launcher_swipe():
    phrasings = [
        Phrasing("google best ramen in tokyo", "web_search", {"query": "best ramen in tokyo"}),
        Phrasing("dim the screen to 20%", "set_brightness", {"percent": 20}),
        Phrasing("open translate please", "open_app", {"app": "Translate"}),  # on the launcher's 2nd page
        Phrasing("turn the wifi off", "toggle_setting", {"setting": "wifi", "on": False}),
    ]
    routes = _expert_routes(phrasings)
    assert routes[0] == ["Chrome", "Search or type web address"]
    assert routes[1] == ["Settings", "Display", "Brightness"]
    assert routes[2][0] == "Translate"
    assert routes[3] == ["Settings", "Network & internet", "Wi-Fi"]


def test_the_held_back_phrasings_are_refused(capsys):
    with pytest.raises(SystemExit) as refused:
        main(["--data", str(DATA)])
    assert refused.value.code == 2
    assert "held-back phrasings" in capsys.readouterr().err
