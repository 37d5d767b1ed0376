"""Task success read from the device state (like AndroidWorld's ``is_successful``)."""

from __future__ import annotations

from distrl_core.envs.protocol import Task
from simulators.simdroid.apps_system import brightness, is_on
from simulators.simdroid.catalog import BRIGHTNESS_MAX, CHROME, TOGGLE_BY_KEY, normalize_query
from simulators.simdroid.state import DeviceState, Page

# The kind of a task that is only its words (a typed instruction no reader recognised, or any on a
# real device): no rule can check it, so its verdict is a model judge's or none.
UNRECOGNISED_KIND = "instruction"
BRIGHTNESS_TOLERANCE_PCT = 2.0  # one slider tap lands within a pixel; 2% forgives rounding, not guessing


def _site_page(state: DeviceState, domain: str) -> Page | None:
    page = state.page
    if page.get("app") == CHROME and page.get("name") == "site" and page.get("domain") == domain:
        return page
    return None


def is_successful(state: DeviceState, task: Task) -> bool:
    p = task.params
    kind = task.kind
    if kind == "open_app":
        return bool(state.package == p["package"])
    if kind == "toggle_setting":
        return bool(is_on(state, TOGGLE_BY_KEY[p["setting"]]) == p["on"])
    if kind == "set_alarm":
        return any(
            a["enabled"] and a["hour"] == p["hour"] and a["minute"] == p["minute"] for a in state.alarms
        )
    if kind == "web_search":
        page = state.page
        return (
            page.get("app") == CHROME
            and page.get("name") == "search"
            and normalize_query(page.get("query", "")) == normalize_query(p["query"])
        )
    if kind == "set_brightness":
        return bool(abs(brightness(state) * 100 / BRIGHTNESS_MAX - p["percent"]) <= BRIGHTNESS_TOLERANCE_PCT)
    if kind == "shop_open_site":
        return _site_page(state, p["site"]) is not None
    if kind == "shop_search":
        site = _site_page(state, p["site"])
        return site is not None and site["view"] == "results" and site["query"] == normalize_query(p["query"])
    if kind == "shop_add_to_cart":
        return any(item["id"] == p["product_id"] for item in state.carts.get(p["site"], []))
    if kind == UNRECOGNISED_KIND:
        return False  # never "done": the episode runs to its horizon or the agent's status()
    raise ValueError(f"no success check for task kind {kind!r} (task {task.task_id})")
