"""Observation types shared by every environment, and uiautomator XML <-> element list.

``parse_ui_xml`` reads real ``uiautomator dump`` output (and SimDroid's, which follows the same
format); it keeps the nodes a policy can act on or read (clickable, editable, checkable,
scrollable, or carrying text/content-desc) and numbers them in document order. ``compact_tree``
renders those elements one per line for text-only policies, e.g.::

    [0] TextView "Network & internet" (0,300,1080,420)
    [1] Switch "Wi-Fi" on (0,420,1080,540)
    [2] EditText "" edit focused (40,160,1040,260)
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from xml.sax.saxutils import quoteattr

__all__ = [
    "Observation",
    "UIElement",
    "compact_tree",
    "elements_to_xml",
    "parse_bounds",
    "parse_ui_xml",
]

Bounds = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class UIElement:
    """One on-screen element, in pixels of the device's logical screen."""

    index: int
    text: str = ""
    content_desc: str = ""
    class_name: str = "android.view.View"
    resource_id: str = ""
    package: str = ""
    bounds: Bounds = (0, 0, 0, 0)  # x1, y1, x2, y2 as uiautomator reports them (x2/y2 exclusive)
    clickable: bool = False
    long_clickable: bool = False
    editable: bool = False
    checkable: bool = False
    checked: bool = False
    scrollable: bool = False
    focusable: bool = False
    focused: bool = False
    enabled: bool = True
    selected: bool = False
    password: bool = False

    @property
    def center(self) -> tuple[int, int]:
        x1, y1, x2, y2 = self.bounds
        return (x1 + x2) // 2, (y1 + y2) // 2

    @property
    def label(self) -> str:
        """What a person would call the element: its text, else its description, else its id."""
        return self.text or self.content_desc or self.resource_id.rpartition("/")[2]

    @property
    def short_class(self) -> str:
        return self.class_name.rpartition(".")[2] or "View"


@dataclass(frozen=True, slots=True)
class Observation:
    """What a policy sees at one step.

    ``ui_text`` is ``compact_tree(elements)``; ``screenshot_png`` is None when screenshots are
    disabled (text-only runs). ``previous_actions`` are canonical action strings, oldest first.
    """

    instruction: str
    step: int
    previous_actions: tuple[str, ...]
    elements: tuple[UIElement, ...]
    ui_text: str
    ui_xml: str
    screenshot_png: bytes | None
    screen_size: tuple[int, int]
    activity: str = ""
    extras: dict[str, object] = field(default_factory=dict)

    def element_center_normalized(self, index: int) -> tuple[float, float]:
        """Centre of element ``index`` as normalized (x, y): what AutoUI-style policies emit."""
        x, y = self.elements[index].center
        width, height = self.screen_size
        return x / width, y / height


# ------------------------------------------------------------------------------------------------
# XML

_BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")


def parse_bounds(text: str) -> Bounds | None:
    match = _BOUNDS.fullmatch(text.strip())
    if not match:
        return None
    x1, y1, x2, y2 = (int(v) for v in match.groups())
    return x1, y1, x2, y2


def _flag(node: ET.Element, name: str) -> bool:
    return node.get(name, "false") == "true"


def extract_hierarchy(xml: str) -> str:
    """The <hierarchy> document alone: `uiautomator dump /dev/tty` appends a status line, and some
    devices print warnings before the XML declaration."""
    start = xml.find("<hierarchy")
    end = xml.rfind("</hierarchy>")
    if start < 0:
        raise ValueError("no <hierarchy> element in the UI dump")
    if end < 0:  # a self-closing empty hierarchy
        return xml[start:].strip()
    return xml[start : end + len("</hierarchy>")]


def _is_interesting(node: ET.Element) -> bool:
    return (
        _flag(node, "clickable")
        or _flag(node, "long-clickable")
        or _flag(node, "checkable")
        or _flag(node, "scrollable")
        or "EditText" in node.get("class", "")
        or bool(node.get("text") or node.get("content-desc"))
    )


def parse_ui_xml(xml: str, *, keep_all: bool = False) -> list[UIElement]:
    """Elements of a uiautomator dump, in document order, renumbered from 0.

    Nodes without area and purely structural nodes (no text, not interactive) are dropped unless
    ``keep_all``. Raises ValueError when ``xml`` holds no parseable hierarchy.
    """
    try:
        root = ET.fromstring(extract_hierarchy(xml))
    except ET.ParseError as exc:
        raise ValueError(f"UI dump is not well-formed XML: {exc}") from exc
    return elements_of(root, keep_all=keep_all)


def elements_of(root: ET.Element, *, keep_all: bool = False) -> list[UIElement]:
    """`parse_ui_xml`'s elements from an already parsed hierarchy (see `simulators.adb.dump`)."""
    elements: list[UIElement] = []
    for node in root.iter("node"):
        bounds = parse_bounds(node.get("bounds", ""))
        if bounds is None or bounds[2] <= bounds[0] or bounds[3] <= bounds[1]:
            continue
        if not keep_all and not _is_interesting(node):
            continue
        class_name = node.get("class", "")
        elements.append(
            UIElement(
                index=len(elements),
                text=node.get("text", ""),
                content_desc=node.get("content-desc", ""),
                class_name=class_name,
                resource_id=node.get("resource-id", ""),
                package=node.get("package", ""),
                bounds=bounds,
                clickable=_flag(node, "clickable"),
                long_clickable=_flag(node, "long-clickable"),
                editable="EditText" in class_name,
                checkable=_flag(node, "checkable"),
                checked=_flag(node, "checked"),
                scrollable=_flag(node, "scrollable"),
                focusable=_flag(node, "focusable"),
                focused=_flag(node, "focused"),
                enabled=node.get("enabled", "true") == "true",
                selected=_flag(node, "selected"),
                password=_flag(node, "password"),
            )
        )
    return elements


# Characters XML 1.0 cannot carry even as entities; typed text may contain them.
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _attr(text: str) -> str:
    return quoteattr(_XML_INVALID.sub("", text))


def _bool(value: bool) -> str:
    return "true" if value else "false"


def elements_to_xml(elements: list[UIElement] | tuple[UIElement, ...], screen_size: tuple[int, int]) -> str:
    """A uiautomator-dump-compatible document: a full-screen FrameLayout holding every element."""
    width, height = screen_size
    package = elements[0].package if elements else ""
    parts = [
        "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>",
        '<hierarchy rotation="0">',
        f'<node index="0" text="" resource-id="" class="android.widget.FrameLayout" package={_attr(package)} '
        'content-desc="" checkable="false" checked="false" clickable="false" enabled="true" '
        'focusable="false" focused="false" scrollable="false" long-clickable="false" password="false" '
        f'selected="false" bounds="[0,0][{width},{height}]">',
    ]
    for position, el in enumerate(elements):
        x1, y1, x2, y2 = el.bounds
        parts.append(
            f'<node index="{position}" text={_attr(el.text)} '
            f"resource-id={_attr(el.resource_id)} class={_attr(el.class_name)} "
            f"package={_attr(el.package)} content-desc={_attr(el.content_desc)} "
            f'checkable="{_bool(el.checkable)}" checked="{_bool(el.checked)}" '
            f'clickable="{_bool(el.clickable)}" enabled="{_bool(el.enabled)}" '
            f'focusable="{_bool(el.focusable)}" focused="{_bool(el.focused)}" '
            f'scrollable="{_bool(el.scrollable)}" long-clickable="{_bool(el.long_clickable)}" '
            f'password="{_bool(el.password)}" selected="{_bool(el.selected)}" '
            f'bounds="[{x1},{y1}][{x2},{y2}]" />'
        )
    parts.append("</node></hierarchy>")
    return "".join(parts)


# ------------------------------------------------------------------------------------------------
# Compact text


def _quote(text: str, limit: int) -> str:
    text = " ".join(text.split())  # newlines would break one-element-per-line
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return '"' + text.replace('"', "'") + '"'


def compact_tree(
    elements: list[UIElement] | tuple[UIElement, ...], *, with_bounds: bool = True, text_limit: int = 40
) -> str:
    """One line per element: ``[index] Class "label" flags (x1,y1,x2,y2)``.

    Flags are printed only where they carry information: ``on``/``off`` for checkable widgets,
    ``edit`` for text fields, ``focused``, ``scroll``, ``disabled``, and ``static`` for elements
    that cannot be tapped (plain labels).
    """
    lines = []
    for el in elements:
        flags = []
        if el.checkable:
            flags.append("on" if el.checked else "off")
        if el.editable:
            flags.append("edit")
        if el.focused:
            flags.append("focused")
        if el.scrollable:
            flags.append("scroll")
        if not el.enabled:
            flags.append("disabled")
        if not (el.clickable or el.long_clickable or el.editable or el.checkable or el.scrollable):
            flags.append("static")
        line = f"[{el.index}] {el.short_class} {_quote(el.label, text_limit)}"
        if flags:
            line += " " + " ".join(flags)
        if with_bounds:
            line += " ({},{},{},{})".format(*el.bounds)
        lines.append(line)
    return "\n".join(lines)
