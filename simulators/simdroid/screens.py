"""State -> Screen: the app dispatch, transient notices, and distractor dialogs."""

from __future__ import annotations

import random
from typing import Any

from simulators.simdroid.apps_browser import browser_screen
from simulators.simdroid.apps_system import (
    clock_screen,
    generic_screen,
    launch,
    launcher_screen,
    settings_screen,
)
from simulators.simdroid.catalog import CHROME, CLOCK, LAUNCHER, SETTINGS
from simulators.simdroid.state import DeviceState
from simulators.simdroid.widgets import BUTTON, TEXT, Layout, Screen, TapHandler, Widget

_BUILDERS = {
    LAUNCHER: launcher_screen,
    SETTINGS: settings_screen,
    CLOCK: clock_screen,
    CHROME: browser_screen,
}

# Distractors: every button either dismisses the dialog ("dismiss") or does something unwanted
# ("open:<package>"), so an agent has to read the dialog rather than tap anything.
GENERIC_DIALOGS: tuple[dict[str, Any], ...] = (
    {
        "kind": "notifications",
        "title": "Allow notifications?",
        "message": "This app would like to send you notifications.",
        "buttons": [["Allow", "dismiss"], ["Don't allow", "dismiss"]],
    },
    {
        "kind": "rate",
        "title": "Enjoying this app?",
        "message": "Rate us on the Play Store.",
        "buttons": [["Rate now", "open:com.android.vending"], ["Not now", "dismiss"]],
    },
    {
        "kind": "update",
        "title": "System update available",
        "message": "Install now or later.",
        "buttons": [["Later", "dismiss"], ["Install", "open:com.android.settings"]],
    },
)
SHOP_DIALOGS: tuple[dict[str, Any], ...] = (
    {
        "kind": "cookies",
        "title": "We value your privacy",
        "message": "This site uses cookies.",
        "buttons": [["Accept all", "dismiss"], ["Reject all", "dismiss"]],
    },
    {
        "kind": "offer",
        "title": "Special offer: 20% off today!",
        "message": "Sign up for our newsletter.",
        "buttons": [["Sign up", "open:com.google.android.gm"], ["No thanks", "dismiss"]],
    },
)


def maybe_show_distractor(state: DeviceState, rng: random.Random, probability: float) -> None:
    """Called after each page change: with ``probability`` a dialog pops up over the new page."""
    if probability <= 0.0 or state.dialog is not None or state.package == LAUNCHER:
        return
    if rng.random() >= probability:
        return
    on_shop = state.page.get("name") == "site"
    pool = SHOP_DIALOGS if on_shop else GENERIC_DIALOGS
    state.dialog = dict(pool[rng.randrange(len(pool))])


def press_dialog_button(state: DeviceState, effect: str) -> None:
    state.dialog = None
    if effect.startswith("open:"):
        launch(state, effect.removeprefix("open:"))


def _pressing(effect: str) -> TapHandler:
    return lambda state, _x: press_dialog_button(state, effect)


def _dialog_screen(state: DeviceState, under: Screen, layout: Layout) -> Screen:
    dialog = state.dialog or {}
    layout.y = layout.height // 3
    widgets = [
        Widget(
            TEXT,
            layout.row(1.0, gap=False),
            text=dialog.get("title", ""),
            resource_id="android:id/alertTitle",
            style="dialog_title",
        ),
        Widget(
            TEXT,
            layout.row(1.0, gap=False),
            text=dialog.get("message", ""),
            resource_id="android:id/message",
            style="dialog",
        ),
    ]
    row = layout.row(1.0, gap=False)
    buttons = dialog.get("buttons", [])
    for i, (label, effect) in enumerate(buttons):
        widgets.append(
            Widget(
                BUTTON,
                layout.split(row, len(buttons), i),
                text=label,
                resource_id=f"android:id/button{i + 1}",
                on_tap=_pressing(effect),
                style="button",
            )
        )
    return Screen(
        under.package,
        under.activity,
        widgets,
        background=under.background,
        modal=True,
        underlay=under.widgets,
    )


def build_screen(state: DeviceState, width: int, height: int) -> Screen:
    page = state.page
    builder = _BUILDERS.get(page["app"], generic_screen)
    screen = builder(state, page, Layout(width, height))
    if state.notice:
        bottom = Layout(width, height)
        bottom.y = height - bottom.unit(1.2)
        screen.widgets.append(
            Widget(TEXT, bottom.row(0.9), text=state.notice, resource_id="android:id/toast", style="toast")
        )
    if state.dialog is not None:
        return _dialog_screen(state, screen, Layout(width, height))
    return screen
