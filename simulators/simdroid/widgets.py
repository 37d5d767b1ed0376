"""Screen building blocks: widgets with their behaviour, and a simple vertical layout.

A ``Screen`` is rebuilt from the device state whenever the state changes; widgets carry closures
that mutate the state when tapped, so app code reads as "this button does that".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from distrl_core.envs.observation import UIElement
from simulators.simdroid.state import DeviceState

Bounds = tuple[int, int, int, int]
TapHandler = Callable[[DeviceState, float], None]  # (state, x fraction inside the widget)
SubmitHandler = Callable[[DeviceState], None]
SwipeHandler = Callable[[DeviceState, str], None]  # (state, finger direction up/down/left/right)

TEXT = "android.widget.TextView"
BUTTON = "android.widget.Button"
IMAGE_BUTTON = "android.widget.ImageButton"
EDIT = "android.widget.EditText"
SWITCH = "android.widget.Switch"
SEEKBAR = "android.widget.SeekBar"


@dataclass(slots=True)
class Widget:
    class_name: str
    bounds: Bounds
    text: str = ""
    content_desc: str = ""
    resource_id: str = ""
    on_tap: TapHandler | None = None
    field: str | None = None  # key into DeviceState.fields for text fields
    on_submit: SubmitHandler | None = None  # ENTER while this field is focused
    checked: bool | None = None  # None: not checkable
    slider_value: float | None = None  # 0..1 for SeekBars
    style: str = "text"  # render hint: text, title, button, icon, field, switch, slider, row, banner
    color: tuple[int, int, int] | None = None

    @property
    def interactive(self) -> bool:
        return self.on_tap is not None or self.field is not None

    def contains(self, x: int, y: int) -> bool:
        x1, y1, x2, y2 = self.bounds
        return x1 <= x < x2 and y1 <= y < y2


@dataclass(slots=True)
class Screen:
    package: str
    activity: str
    widgets: list[Widget]
    on_swipe: SwipeHandler | None = None
    background: tuple[int, int, int] = (250, 250, 250)
    modal: bool = False  # a dialog is up: only its widgets are visible and tappable
    underlay: list[Widget] = field(default_factory=list)  # the page under a dialog, drawn dimmed

    def hit(self, x: int, y: int) -> Widget | None:
        # later widgets are drawn on top, so search from the end
        for widget in reversed(self.widgets):
            if widget.interactive and widget.contains(x, y):
                return widget
        return None

    def field_widget(self, key: str) -> Widget | None:
        return next((w for w in self.widgets if w.field == key), None)

    def elements(self, state: DeviceState) -> list[UIElement]:
        out: list[UIElement] = []
        for widget in self.widgets:
            if not (widget.interactive or widget.text or widget.content_desc or widget.checked is not None):
                continue  # parse_ui_xml drops such nodes too; both sides must number elements alike
            is_field = widget.field is not None
            text = state.fields.get(widget.field, "") if is_field else widget.text  # type: ignore[arg-type]
            if widget.slider_value is not None:
                text = f"{round(widget.slider_value * 100)}%"
            out.append(
                UIElement(
                    index=len(out),
                    text=text,
                    content_desc=widget.content_desc,
                    class_name=widget.class_name,
                    resource_id=widget.resource_id,
                    package=self.package,
                    bounds=widget.bounds,
                    clickable=widget.interactive,
                    long_clickable=False,
                    editable=is_field,
                    checkable=widget.checked is not None,
                    checked=bool(widget.checked),
                    scrollable=False,
                    focusable=is_field,
                    focused=is_field and state.focus == widget.field,
                )
            )
        return out


@dataclass
class Layout:
    """Stacks full-width rows top to bottom. Units are pixels of the logical screen; row heights are
    fractions of the screen height so any configured size lays out the same way."""

    width: int
    height: int
    y: int = 0
    margin: int = field(init=False)

    def __post_init__(self) -> None:
        self.margin = max(1, self.width // 27)
        self.y = self.status_bar_height

    @property
    def status_bar_height(self) -> int:
        return max(1, self.height // 40)

    def unit(self, rows: float) -> int:
        return max(1, int(self.height * rows / 20))

    def row(self, rows: float = 1.0, *, indent: int = 0, gap: bool = True) -> Bounds:
        """The next full-width row, ``rows`` twentieths of the screen tall."""
        h = self.unit(rows)
        top = self.y
        self.y += h + (self.margin // 3 if gap else 0)
        return (self.margin + indent, top, self.width - self.margin, min(self.height, top + h))

    def split(self, bounds: Bounds, parts: int, index: int) -> Bounds:
        """The ``index``-th of ``parts`` equal columns of a row."""
        x1, y1, x2, y2 = bounds
        step = (x2 - x1) / parts
        return (int(x1 + index * step), y1, int(x1 + (index + 1) * step), y2)

    def right(self, bounds: Bounds, fraction: float) -> Bounds:
        x1, y1, x2, y2 = bounds
        return (int(x2 - (x2 - x1) * fraction), y1, x2, y2)

    def left(self, bounds: Bounds, fraction: float) -> Bounds:
        x1, y1, x2, y2 = bounds
        return (x1, y1, int(x1 + (x2 - x1) * fraction), y2)


def title_bar(layout: Layout, title: str, package: str, on_up: TapHandler | None) -> list[Widget]:
    """App bar: an optional Navigate-up button and the page title."""
    bar = layout.row(1.2)
    widgets = []
    if on_up is not None:
        up = layout.left(bar, 0.12)
        widgets.append(
            Widget(IMAGE_BUTTON, up, content_desc="Navigate up", on_tap=on_up, style="icon", resource_id="")
        )
        bar = (up[2], bar[1], bar[2], bar[3])
    widgets.append(Widget(TEXT, bar, text=title, style="title", resource_id=f"{package}:id/title"))
    return widgets


def go_back(state: DeviceState, _fraction: float = 0.0) -> None:
    state.pop()
