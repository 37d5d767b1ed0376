"""Launcher, Settings, Clock and the placeholder apps."""

from __future__ import annotations

from simulators.simdroid.catalog import (
    APPS,
    APPS_PER_PAGE,
    BRIGHTNESS_MAX,
    CHROME,
    CLOCK,
    LAUNCHER,
    SETTINGS,
    SETTINGS_PAGES,
    TOGGLES,
    App,
    Toggle,
    find_app,
)
from simulators.simdroid.state import DeviceState, Page
from simulators.simdroid.widgets import (
    BUTTON,
    EDIT,
    IMAGE_BUTTON,
    SEEKBAR,
    SWITCH,
    TEXT,
    Layout,
    Screen,
    TapHandler,
    Widget,
    go_back,
    title_bar,
)

LAUNCHER_PAGES = (len(APPS) + APPS_PER_PAGE - 1) // APPS_PER_PAGE
GRID_COLUMNS = 4


def root_page(package: str) -> Page:
    if package == SETTINGS:
        return {"app": SETTINGS, "name": "main"}
    if package == CLOCK:
        return {"app": CLOCK, "name": "alarms"}
    if package == CHROME:
        return {"app": CHROME, "name": "newtab"}
    return {"app": package, "name": "main"}


def launch(state: DeviceState, package: str) -> None:
    state.open_app_root(root_page(package))


# Tap handlers made per widget; a factory binds the widget's value when the screen is built.
def _launching(package: str) -> TapHandler:
    return lambda state, _x: launch(state, package)


def _pushing(app: str, name: str) -> TapHandler:
    return lambda state, _x: state.push({"app": app, "name": name})


def _flipping(toggle: Toggle) -> TapHandler:
    return lambda state, _x: set_toggle(state, toggle, not is_on(state, toggle))


def _switching_tab(name: str) -> TapHandler:
    return lambda state, _x: state.replace_top({"app": CLOCK, "name": name})


def _icon_color(app: App) -> tuple[int, int, int]:
    seed = sum(ord(c) * (i + 1) for i, c in enumerate(app.package))
    return (60 + seed % 150, 60 + (seed // 7) % 150, 60 + (seed // 49) % 150)


# ------------------------------------------------------------------------------------------------
# Launcher


def launcher_screen(state: DeviceState, page: Page, layout: Layout) -> Screen:
    number = int(page.get("page", 0))
    widgets = []

    def open_search(st: DeviceState, _f: float) -> None:
        launch(st, CHROME)
        st.focus_field("chrome.url", "")

    widgets.append(
        Widget(
            TEXT,
            layout.row(1.0),
            text="Search",
            content_desc="Google search",
            resource_id=f"{LAUNCHER}:id/search_container",
            on_tap=open_search,
            style="field",
        )
    )
    layout.row(0.5)
    apps = APPS[number * APPS_PER_PAGE : (number + 1) * APPS_PER_PAGE]
    row = layout.row(2.4)
    for i, app in enumerate(apps):
        if i and i % GRID_COLUMNS == 0:
            row = layout.row(2.4)
        widgets.append(
            Widget(
                TEXT,
                layout.split(row, GRID_COLUMNS, i % GRID_COLUMNS),
                text=app.name,
                content_desc=app.name,
                resource_id=f"{LAUNCHER}:id/icon",
                on_tap=_launching(app.package),
                style="icon",
                color=_icon_color(app),
            )
        )
    layout.y = max(layout.y, layout.height - layout.unit(1.5))
    widgets.append(
        Widget(
            TEXT,
            layout.row(0.8),
            text=f"Page {number + 1} of {LAUNCHER_PAGES}",
            resource_id=f"{LAUNCHER}:id/page_indicator",
        )
    )

    def swipe(st: DeviceState, direction: str) -> None:
        # finger moving left reveals the next page, as on a phone
        step = {"left": 1, "right": -1}.get(direction, 0)
        st.page["page"] = min(LAUNCHER_PAGES - 1, max(0, number + step))

    return Screen(LAUNCHER, f"{LAUNCHER}/.uioverrides.QuickstepLauncher", widgets, on_swipe=swipe)


# ------------------------------------------------------------------------------------------------
# Settings


def is_on(state: DeviceState, toggle: Toggle) -> bool:
    return state.setting(toggle.namespace, toggle.setting) == toggle.on_value


def set_toggle(state: DeviceState, toggle: Toggle, on: bool) -> None:
    state.settings.setdefault(toggle.namespace, {})[toggle.setting] = (
        toggle.on_value if on else toggle.off_value
    )


def brightness(state: DeviceState) -> int:
    try:
        return int(state.setting("system", "screen_brightness") or 0)
    except ValueError:
        return 0


_EXTRA_SETTINGS = {"apps": "Apps", "storage": "Storage", "about": "About phone"}


def settings_screen(state: DeviceState, page: Page, layout: Layout) -> Screen:
    name: str = page["name"]
    activity = f"{SETTINGS}/.Settings" if name == "main" else f"{SETTINGS}/.SubSettings"
    if name == "main":
        widgets = title_bar(layout, "Settings", SETTINGS, None)
        for key, label in (*SETTINGS_PAGES.items(), *_EXTRA_SETTINGS.items()):
            widgets.append(
                Widget(
                    TEXT,
                    layout.row(1.0),
                    text=label,
                    resource_id="android:id/title",
                    on_tap=_pushing(SETTINGS, key),
                    style="row",
                )
            )
        return Screen(SETTINGS, activity, widgets)

    title = SETTINGS_PAGES.get(name) or _EXTRA_SETTINGS.get(name, name)
    widgets = title_bar(layout, title, SETTINGS, go_back)
    for toggle in TOGGLES:
        if toggle.page != name:
            continue
        widgets.append(
            Widget(
                SWITCH,
                layout.row(1.0),
                text=toggle.label,
                resource_id=f"{SETTINGS}:id/switch_{toggle.key}",
                checked=is_on(state, toggle),
                on_tap=_flipping(toggle),
                style="switch",
            )
        )
    if name == "display":
        level = brightness(state)
        widgets.append(Widget(TEXT, layout.row(0.8), text="Brightness level"))

        def set_level(st: DeviceState, fraction: float) -> None:
            value = round(min(1.0, max(0.0, fraction)) * BRIGHTNESS_MAX)
            st.settings["system"]["screen_brightness"] = str(value)

        widgets.append(
            Widget(
                SEEKBAR,
                layout.row(1.0),
                content_desc="Brightness",
                resource_id=f"{SETTINGS}:id/brightness_slider",
                slider_value=level / BRIGHTNESS_MAX,
                on_tap=set_level,
                style="slider",
            )
        )
    if name == "about":
        widgets.append(Widget(TEXT, layout.row(1.0), text="Device name: SimDroid"))
        widgets.append(Widget(TEXT, layout.row(1.0), text="Android version: 14"))
    if name in ("apps", "storage"):
        widgets.append(Widget(TEXT, layout.row(1.0), text="Nothing to manage here"))
    return Screen(SETTINGS, activity, widgets)


# ------------------------------------------------------------------------------------------------
# Clock

CLOCK_TABS = {"alarms": "Alarm", "world": "Clock", "timer": "Timer", "stopwatch": "Stopwatch"}


def format_time(hour: int, minute: int) -> str:
    return f"{hour:02d}:{minute:02d}"


def _clock_tabs(layout: Layout, current: str) -> list[Widget]:
    row = layout.row(1.0)
    return [
        Widget(
            BUTTON,
            layout.split(row, len(CLOCK_TABS), i),
            text=label,
            resource_id=f"{CLOCK}:id/tab_{name}",
            on_tap=_switching_tab(name),
            style="button" if name != current else "title",
        )
        for i, (name, label) in enumerate(CLOCK_TABS.items())
    ]


def _save_alarm(state: DeviceState) -> None:
    try:
        hour = int(state.fields.get("clock.hour", "").strip())
        minute = int(state.fields.get("clock.minute", "").strip())
    except ValueError:
        state.notice = "Enter a valid time"
        return
    if not (0 <= hour <= 23 and 0 <= minute <= 59):
        state.notice = "Enter a valid time"
        return
    state.alarms.append({"hour": hour, "minute": minute, "enabled": True})
    state.pop()
    state.notice = f"Alarm set for {format_time(hour, minute)}"


def open_alarm_editor(state: DeviceState, _f: float = 0.0) -> None:
    state.push({"app": CLOCK, "name": "editor"})
    state.fields["clock.hour"] = ""
    state.fields["clock.minute"] = ""
    state.focus_field("clock.hour")  # the time picker opens with the hour field focused


def clock_screen(state: DeviceState, page: Page, layout: Layout) -> Screen:
    name = page["name"]
    activity = f"{CLOCK}/com.android.deskclock.DeskClock"
    if name == "editor":
        widgets = title_bar(layout, "Set alarm", CLOCK, go_back)
        for key, label in (("hour", "Hour (0-23)"), ("minute", "Minute (0-59)")):
            widgets.append(Widget(TEXT, layout.row(0.7), text=label))
            field = f"clock.{key}"
            widgets.append(
                Widget(
                    EDIT,
                    layout.row(1.0),
                    text=state.fields.get(field, ""),
                    resource_id=f"{CLOCK}:id/{key}_input",
                    field=field,
                    on_submit=(lambda st: st.focus_field("clock.minute")) if key == "hour" else _save_alarm,
                    style="field",
                )
            )
        buttons = layout.row(1.0)
        widgets.append(
            Widget(BUTTON, layout.split(buttons, 2, 0), text="Cancel", on_tap=go_back, style="button")
        )
        widgets.append(
            Widget(
                BUTTON,
                layout.split(buttons, 2, 1),
                text="OK",
                resource_id="android:id/button1",
                on_tap=lambda st, _f: _save_alarm(st),
                style="button",
            )
        )
    else:
        widgets = title_bar(layout, "Clock", CLOCK, None) + _clock_tabs(layout, name)
        if name == "alarms":
            for i, alarm in enumerate(state.alarms[:8]):
                label = format_time(alarm["hour"], alarm["minute"])
                row = layout.row(1.0)
                widgets.append(
                    Widget(TEXT, layout.left(row, 0.6), text=label, resource_id=f"{CLOCK}:id/digital_clock")
                )

                def flip(st: DeviceState, _f: float, position: int = i) -> None:
                    st.alarms[position]["enabled"] = not st.alarms[position]["enabled"]

                widgets.append(
                    Widget(
                        SWITCH,
                        layout.right(row, 0.4),
                        content_desc=f"{label} alarm",
                        resource_id=f"{CLOCK}:id/onoff",
                        checked=bool(alarm["enabled"]),
                        on_tap=flip,
                        style="switch",
                    )
                )
            if not state.alarms:
                widgets.append(Widget(TEXT, layout.row(1.0), text="No alarms"))
            layout.y = max(layout.y, layout.height - layout.unit(2.5))
            widgets.append(
                Widget(
                    IMAGE_BUTTON,
                    layout.split(layout.row(1.4), 5, 2),
                    content_desc="Add alarm",
                    resource_id=f"{CLOCK}:id/fab",
                    on_tap=open_alarm_editor,
                    style="icon",
                )
            )
        else:
            text = {"world": "Local time 12:00", "timer": "00:00:00", "stopwatch": "00:00.00"}[name]
            widgets.append(Widget(TEXT, layout.row(2.0), text=text, style="title"))
            widgets.append(Widget(BUTTON, layout.row(1.0), text="Start", on_tap=_noop, style="button"))
    return Screen(CLOCK, activity, widgets)


def _noop(state: DeviceState, _f: float) -> None:
    state.notice = "Nothing happens in this demo"


# ------------------------------------------------------------------------------------------------
# Placeholder apps


def generic_screen(state: DeviceState, page: Page, layout: Layout) -> Screen:
    package = page["app"]
    app = find_app(package)
    name = app.name if app else package
    activity = f"{package}/{app.activity}" if app else f"{package}/.MainActivity"
    widgets = title_bar(layout, name, package, None)
    widgets.append(Widget(TEXT, layout.row(1.0), text=f"Welcome to {name}"))
    row = layout.row(1.0)
    widgets.append(Widget(BUTTON, layout.split(row, 2, 0), text="Search", on_tap=_noop, style="button"))
    widgets.append(Widget(BUTTON, layout.split(row, 2, 1), text="Menu", on_tap=_noop, style="button"))
    return Screen(package, activity, widgets)
