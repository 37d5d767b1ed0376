"""A scripted expert that solves every SimDroid task from any state it finds the device in.

It is closed-loop: each call looks at the current screen and state and returns the next Action,
so it recovers from its own noise, distractor dialogs and dropped taps. With ``noise`` > 0 it
sometimes takes a random plausible action instead, which makes it an imperfect demonstrator for
warm starts (successful and failed trajectories, recoveries).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING

from distrl_core.envs.actions import Action
from distrl_core.envs.observation import UIElement
from distrl_core.envs.protocol import Task
from simulators.simdroid.apps_browser import URL_FIELD, search_field
from simulators.simdroid.apps_system import format_time
from simulators.simdroid.catalog import (
    APP_BY_PACKAGE,
    CHROME,
    CLOCK,
    LAUNCHER,
    SETTINGS,
    SETTINGS_PAGES,
    TOGGLE_BY_KEY,
    launcher_page_of,
    normalize_query,
)
from simulators.simdroid.device import SimDroid

if TYPE_CHECKING:
    from simulators.sim_env import SimDroidEnv

__all__ = ["expert_action", "random_plausible_action"]

_NOISE_WORDS = ("hello", "settings", "search", "ok", "test", "cart", "7", "wifi")


class _View:
    """The current screen as the expert reads it: elements plus the device state."""

    def __init__(self, device: SimDroid) -> None:
        self.device = device
        self.state = device.state
        self.elements = device.elements()
        self.size = device.size

    def find(self, predicate: Callable[[UIElement], bool]) -> UIElement | None:
        return next((el for el in self.elements if predicate(el)), None)

    def by_id(self, resource_id: str) -> UIElement | None:
        return self.find(lambda el: el.resource_id == resource_id)

    def by_text(self, text: str) -> UIElement | None:
        return self.find(lambda el: el.text == text and el.clickable)


def _tap(element: UIElement | None) -> Action:
    if element is None:  # the screen is not what the plan expected: step back and re-plan
        return Action.press("BACK")
    return Action.tap(element.index)


def _go_to_app(view: _View, package: str) -> Action:
    state = view.state
    if state.package != LAUNCHER:
        return Action.press("HOME")
    target_page = launcher_page_of(APP_BY_PACKAGE[package])
    current = int(state.page.get("page", 0))
    if current < target_page:
        return Action.swipe("left")
    if current > target_page:
        return Action.swipe("right")
    name = APP_BY_PACKAGE[package].name
    return _tap(view.find(lambda el: el.resource_id.endswith(":id/icon") and el.text == name))


def _fill_and_submit(view: _View, field_key: str, element: UIElement | None, value: str) -> Action:
    """Focus a text field, make its content ``value``, press Enter."""
    state = view.state
    if state.focus != field_key:
        return _tap(element)
    content = state.fields.get(field_key, "")
    if content == value:
        return Action.press("ENTER")
    if state.replace_on_type:
        return Action.type_text(value)
    if content and value.startswith(content):
        return Action.type_text(value[len(content) :])
    if content:
        # The action language has no DEL key: BACK drops focus, and the next tap selects all again.
        return Action.press("BACK")
    return Action.type_text(value)


def _settings_page(view: _View, page_key: str) -> Action | None:
    """Navigate inside Settings to ``page_key``; None once there."""
    state = view.state
    if state.package != SETTINGS:
        return _go_to_app(view, SETTINGS)
    name = state.page["name"]
    if name == page_key:
        return None
    if name == "main":
        return _tap(view.by_text(SETTINGS_PAGES[page_key]))
    return Action.press("BACK")


def _toggle(view: _View, task: Task) -> Action:
    toggle = TOGGLE_BY_KEY[task.params["setting"]]
    step = _settings_page(view, toggle.page)
    return step or _tap(view.by_id(f"{SETTINGS}:id/switch_{toggle.key}"))


def _brightness(view: _View, task: Task) -> Action:
    step = _settings_page(view, "display")
    if step is not None:
        return step
    slider = view.by_id(f"{SETTINGS}:id/brightness_slider")
    if slider is None:
        return Action.press("BACK")
    x1, y1, x2, y2 = slider.bounds
    # the device reads the fraction as (x - x1) / (x2 - x1 - 1); aim at the pixel's centre
    x = x1 + task.params["percent"] / 100 * (x2 - x1 - 1) + 0.5
    width, height = view.size
    return Action.tap(point=(x / width, (y1 + y2) / 2 / height))


def _alarm(view: _View, task: Task) -> Action:
    state = view.state
    hour, minute = task.params["hour"], task.params["minute"]
    if state.package != CLOCK:
        return _go_to_app(view, CLOCK)
    name = state.page["name"]
    if name == "editor":
        for key, value in (("hour", str(hour)), ("minute", str(minute))):
            field_key = f"clock.{key}"
            if state.fields.get(field_key, "").strip() != value:
                element = view.by_id(f"{CLOCK}:id/{key}_input")
                if state.focus == field_key and not state.replace_on_type and state.fields.get(field_key):
                    return Action.press("BACK")  # drop focus; the next tap selects all again
                if state.focus != field_key:
                    return _tap(element)
                return Action.type_text(value)
        return _tap(view.by_text("OK"))
    if name != "alarms":
        return _tap(view.by_text("Alarm"))
    label = f"{format_time(hour, minute)} alarm"
    disabled = view.find(lambda el: el.content_desc == label and not el.checked)
    if disabled is not None:
        return _tap(disabled)
    return _tap(view.find(lambda el: el.content_desc == "Add alarm"))


def _on_site(view: _View, domain: str) -> bool:
    page = view.state.page
    return page.get("app") == CHROME and page.get("name") == "site" and page.get("domain") == domain


def _browser_go(view: _View, text: str) -> Action:
    if view.state.package != CHROME:
        return _go_to_app(view, CHROME)
    return _fill_and_submit(view, URL_FIELD, view.by_id(f"{CHROME}:id/url_bar"), text)


def _shop(view: _View, task: Task) -> Action:
    params = task.params
    domain, level = params["site"], params["level"]
    if not _on_site(view, domain):
        return _browser_go(view, domain)
    query = normalize_query(params.get("query", ""))
    page = view.state.page
    if level == 3 and page["view"] == "product" and page["query"] == query and page["rank"] == 0:
        return _tap(view.by_id(f"{domain}:id/add_to_cart"))
    if level == 3 and page["view"] == "results" and page["query"] == query:
        return _tap(view.by_id(f"{domain}:id/product_title"))
    return _fill_and_submit(view, search_field(domain), view.by_id(f"{domain}:id/search"), query)


def _dismiss_dialog(view: _View) -> Action:
    dialog = view.state.dialog or {}
    for i, (_label, effect) in enumerate(dialog.get("buttons", [])):
        if effect == "dismiss":
            return _tap(view.by_id(f"android:id/button{i + 1}"))
    return Action.press("BACK")


_PLANS = {
    "open_app": lambda view, task: _go_to_app(view, task.params["package"]),
    "toggle_setting": _toggle,
    "set_brightness": _brightness,
    "set_alarm": _alarm,
    "web_search": lambda view, task: _browser_go(view, task.params["query"]),
    "shop_open_site": _shop,
    "shop_search": _shop,
    "shop_add_to_cart": _shop,
}


def random_plausible_action(elements: list[UIElement], rng: random.Random, instruction: str = "") -> Action:
    """What a careless user might do: mostly tap something, sometimes go back, scroll or type."""
    roll = rng.random()
    clickable = [el for el in elements if el.clickable]
    if roll < 0.6 and clickable:
        return Action.tap(rng.choice(clickable).index)
    if roll < 0.7:
        return Action.press("BACK")
    if roll < 0.8:
        return Action.swipe(rng.choice(("up", "down", "left", "right")))
    if roll < 0.9:
        words = instruction.replace('"', " ").split() or list(_NOISE_WORDS)
        return Action.type_text(rng.choice(words))
    if roll < 0.95:
        return Action.press("ENTER")
    return Action.press("HOME")


def expert_action(
    source: SimDroid | SimDroidEnv, task: Task, noise: float = 0.0, rng: random.Random | None = None
) -> Action:
    """The next action towards solving ``task`` on ``source`` (a SimDroid, or a SimDroidEnv: its
    device); ``status(complete)`` once solved.

    ``noise`` is the probability of a random plausible action instead; pass ``rng`` (e.g.
    ``random.Random(seed)``) to make noisy demonstrations reproducible.
    """
    if not 0.0 <= noise <= 1.0:
        raise ValueError(f"expert noise is a probability in [0, 1], got {noise}")
    device = source if isinstance(source, SimDroid) else source.device
    view = _View(device)
    if noise > 0.0:
        if rng is None:
            raise ValueError(
                "a noisy expert needs rng=random.Random(seed) so demonstrations are reproducible"
            )
        if rng.random() < noise:
            return random_plausible_action(view.elements, rng, task.instruction)
    if view.state.dialog is not None:
        return _dismiss_dialog(view)
    if device.is_successful(task):
        return Action.complete()
    plan = _PLANS.get(task.kind)
    if plan is None:
        raise ValueError(f"the scripted expert has no plan for task kind {task.kind!r}")
    return plan(view, task)
