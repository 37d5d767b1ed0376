"""The screen-only observation: elements read from a screenshot by a text detector, not the UI dump.

A phone's UI dump is often missing or useless (games, WebViews, canvas apps, a dump that times out
while the screen animates), while the screenshot is always there. Under ``observation="screen"``
an OCR model (``simulators.ocr``) reads text boxes from the screenshot and :func:`screen_elements`
turns them into the same ``UIElement``s, so ``compact_tree`` writes the observation text every
policy already reads. Every box is offered as tappable (a screenshot does not say what reacts to a
tap), and a tap on element ``i`` is executed, and stored, as a tap on its box's centre
(:func:`as_executed`): element numbers mean nothing to the device the screen was read from.

Widgets that draw no text (a slider, an icon button, an empty text field) are found in the pixels
by ``distrl_core.envs.screen_widgets`` and join the elements as a ``SeekBar``, an ``ImageButton``
or an ``EditText`` (``ScreenConfig.widgets``); a switch found there becomes a ``Switch`` named by
the text beside it and flagged on or off, as the UI dump's are, and a caret seen after a field's
text makes that text a focused ``EditText``.

This module is pure: boxes in, elements and actions out; reading the pixels is the caller's job.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from distrl_core.envs.action_rules import ActionKind
from distrl_core.envs.actions import Action
from distrl_core.envs.observation import Observation, UIElement, compact_tree
from distrl_core.envs.screen_controls import Line, caret_marks, switch_labels
from distrl_core.envs.screen_widgets import WidgetBox

__all__ = [
    "OBSERVATION_KINDS",
    "WIDGET_ELEMENTS",
    "ObservationKind",
    "ScreenConfig",
    "TextBox",
    "as_executed",
    "find_text",
    "observation_kind",
    "respace",
    "screen_elements",
    "screen_observation",
    "text_key",
]

ObservationKind = Literal["tree", "screen"]
OBSERVATION_KINDS: tuple[ObservationKind, ...] = ("tree", "screen")
OBSERVATION_KEY = "observation"  # the Observation.extras key naming the kind ("tree" when absent)
FOCUSED_FIELD = "focused field"  # the kind of an empty field whose caret was seen (``WidgetBox.focused``)
SWITCH_ON = "switch on"  # the kind of a switch whose knob is at its on end (``WidgetBox.checked``)
CARET = "|"  # SimDroid draws a focused field's text caret as a bar, and an OCR reads it as one


@dataclass(frozen=True, slots=True)
class TextBox:
    """One text line an OCR read: its text, confidence in [0, 1], its axis-aligned box
    ``(x1, y1, x2, y2)`` in screenshot pixels and, where the reader gives them, the ``(x1, x2)``
    span of each of the text's characters but spaces, in order (empty when it gives none)."""

    text: str
    score: float
    box: tuple[float, float, float, float]
    spans: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class ScreenConfig:
    """How OCR boxes become elements.

    - ``min_score``: boxes read with less confidence are dropped (noise on icons and photos).
    - ``status_bar``: boxes whose centre lies in this top fraction of the screen are dropped: the
      status bar's clock and icons are on every screen and never what a task needs (Android's
      bar is 24 dp, about 1/40 of a phone's height).
    - ``max_elements``: at most this many boxes, top to bottom, keep a prompt bounded on busy
      screens (a page of text can hold hundreds of lines).
    - ``widgets``: widgets that draw no text are found in the screenshot's pixels
      (``screen_widgets.find_widgets``: sliders, icon buttons, empty fields: no OCR reads them)
      and become elements too: ``SeekBar "slider"`` (a tap at a fraction of its width sets that
      fraction), ``ImageButton`` named by its glyph's shape ("add" for a plus, "back" for a left
      chevron: ``screen_glyphs``; "icon" when unsure), an empty text field's ``EditText "field" edit`` (named
      by its form label where one is read above or left of it, ``focused`` with its caret) and a
      switch's ``Switch`` (named by the text left of it on its row, which it takes the place of,
      ``on`` or ``off`` by its knob); the caret after a field's text makes that text a focused
      ``EditText``, without what the OCR read the caret as. Off, the elements are the OCR's boxes
      alone.
    """

    min_score: float = 0.5
    status_bar: float = 0.025
    max_elements: int = 60
    widgets: bool = True

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_score <= 1.0 or not 0.0 <= self.status_bar < 1.0:
            raise ValueError("ScreenConfig.min_score and status_bar are fractions in [0, 1]")
        if self.max_elements < 1:
            raise ValueError(f"ScreenConfig.max_elements must be >= 1, got {self.max_elements}")


def respace(chars: Sequence[str], boxes: Sequence[tuple[float, float]], gap: float = 0.95) -> str:
    """The text of one OCR line with its word spaces put back.

    Recognition models trained mostly on Chinese drop many spaces of English text ("Topstories
    thisweek"), which splits no word of a word-level tokenizer's vocabulary correctly. The
    characters' horizontal spans (``(x1, x2)`` each) still show the gaps: a gap wider than ``gap``
    times the median character width is a space. The spans come from the recogniser's decoding
    columns, so gaps inside a word reach 0.9 of a character on SimDroid's screens (``W|eather``)
    while a dropped space is about 1: only wide gaps count.
    """
    widths = [x2 - x1 for (x1, x2), c in zip(boxes, chars, strict=True) if c.strip() and x2 > x1]
    if not widths:
        return "".join(chars).strip()
    limit = gap * statistics.median(widths)
    out: list[str] = []
    previous_end: float | None = None
    for char, (x1, x2) in zip(chars, boxes, strict=True):
        if not char.strip():
            out.append(" ")
            previous_end = None
            continue
        if previous_end is not None and x1 - previous_end > limit and out and out[-1] != " ":
            out.append(" ")
        out.append(char)
        previous_end = x2
    return " ".join("".join(out).split())


# A widget's element: (class, label), the label saying what it is where no text names it.
WIDGET_ELEMENTS = {
    "slider": ("android.widget.SeekBar", "slider"),
    "icon": ("android.widget.ImageButton", "icon"),
    "field": ("android.widget.EditText", "field"),
    "switch": ("android.widget.Switch", "switch"),
}
_Kept = tuple[int, int, int, int, str, str]  # bounds, text, kind: "text", "focused" or a widget's


def screen_elements(
    boxes: Sequence[TextBox],
    shot_size: tuple[int, int],
    screen_size: tuple[int, int],
    config: ScreenConfig = ScreenConfig(),
    widgets: Sequence[WidgetBox] = (),
) -> tuple[UIElement, ...]:
    """Elements of the boxes and the ``widgets`` (both in screenshot pixels), in reading order
    (top to bottom, then left to right), with bounds in the screen's pixels (a screenshot may be
    smaller than the screen). A text that ends in the caret is a focused text field (its text
    without the caret): the one state a screenshot shows that the policies' candidate actions need
    (typing goes into a focused field). A widget is a clickable element with a generic label
    (``WIDGET_ELEMENTS``); its box is exact pixels (x2, y2 exclusive), scaled as such. An empty
    field is named by the text line just above it, else left of it on its row (the form's label,
    as people read it: "Hour" and "Minute" fields apart), and is focused when its caret was seen
    (``WidgetBox.focused``). A switch takes the place of the text left of it on its row, as its
    label, and of any text read over it (an off knob's ring reads as an "O"); a caret after a text
    makes it a focused field (``screen_controls.caret_marks``). When a modal dialog's panel was
    found (a ``modal`` widget: ``screen_modal``), only the boxes and widgets centred inside it are
    kept, as the UI dump shows the dialog's window alone: the page under its scrim stays readable
    to an OCR but takes no tap."""
    sx = screen_size[0] / max(1, shot_size[0])
    sy = screen_size[1] / max(1, shot_size[1])
    texts: list[Line] = [
        (box.box, " ".join(box.text.split()), box.spans)
        for box in boxes
        if box.score >= config.min_score and box.text.strip()
    ]
    modal = next((w.box for w in widgets if w.kind == "modal"), None)
    if modal is not None:  # a dialog is up: the dimmed page under its scrim takes no tap
        texts = [line for line in texts if _centred_in(line[0], modal)]
        widgets = [w for w in widgets if w.kind != "modal" and _centred_in(w.box, modal)]
    focused_texts = caret_marks(texts, [w.box for w in widgets if w.kind == "caret"])
    labels = switch_labels(texts, [w.box for w in widgets if w.kind == "switch"])
    kept: list[_Kept] = []
    for widget in widgets:
        if widget.kind == "caret":
            continue
        wx1, wy1, wx2, wy2 = widget.box
        bounds = (
            max(0, int(wx1 * sx)),
            max(0, int(wy1 * sy)),
            min(screen_size[0], math.ceil(wx2 * sx)),
            min(screen_size[1], math.ceil(wy2 * sy)),
        )
        shown = bounds[2] > bounds[0] and bounds[3] > bounds[1]
        if shown and (bounds[1] + bounds[3]) / 2 >= config.status_bar * screen_size[1]:
            if widget.kind == "switch":
                kept.append((*bounds, labels.get(widget.box, ""), SWITCH_ON if widget.checked else "switch"))
            else:  # an icon's glyph name rides as its text (fields are named from their label)
                name = widget.name if widget.kind == "icon" else ""
                kept.append((*bounds, name, FOCUSED_FIELD if widget.focused else widget.kind))
    for i, ((x1, y1, x2, y2), text, _) in enumerate(texts):
        if not text:  # taken by a switch
            continue
        bounds = (
            max(0, int(x1 * sx)),
            max(0, int(y1 * sy)),
            min(screen_size[0], int(x2 * sx) + 1),
            min(screen_size[1], int(y2 * sy) + 1),
        )
        if bounds[2] <= bounds[0] or bounds[3] <= bounds[1]:
            continue
        if (bounds[1] + bounds[3]) / 2 < config.status_bar * screen_size[1]:
            continue
        focused = text.endswith(CARET) or i in focused_texts
        kept.append((*bounds, text.removesuffix(CARET).rstrip(), "focused" if focused else "text"))
    ordered = _reading_order(kept)[: config.max_elements]
    return tuple(_element(i, entry, ordered) for i, entry in enumerate(ordered))


def _centred_in(box: tuple[float, float, float, float], panel: tuple[int, int, int, int]) -> bool:
    """Whether ``box``'s centre lies inside ``panel`` (both in screenshot pixels)."""
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return panel[0] <= cx < panel[2] and panel[1] <= cy < panel[3]


def _element(index: int, entry: _Kept, ordered: Sequence[_Kept]) -> UIElement:
    """Element ``index`` of the screen, of one kept box (``ordered``: all of them, for a field's
    label)."""
    x1, y1, x2, y2, text, kind = entry
    if kind in ("switch", SWITCH_ON):
        class_name, label = WIDGET_ELEMENTS["switch"]
        return UIElement(
            index=index,
            text=text,
            content_desc="" if text else label,
            class_name=class_name,
            bounds=(x1, y1, x2, y2),
            clickable=True,
            checkable=True,
            checked=kind == SWITCH_ON,
        )
    if kind in WIDGET_ELEMENTS or kind == FOCUSED_FIELD:
        class_name, label = WIDGET_ELEMENTS["field" if kind == FOCUSED_FIELD else kind]
        field = kind in ("field", FOCUSED_FIELD)
        if field:  # named as people read a form: by the label above it or left of it
            label = _field_label((x1, y1, x2, y2), ordered) or label
        elif kind == "icon":  # named by its glyph ("add", "back"), else the generic "icon"
            label = text or label
        return UIElement(
            index=index,
            content_desc=label,
            class_name=class_name,
            bounds=(x1, y1, x2, y2),
            clickable=True,
            editable=field,
            focusable=field,
            focused=kind == FOCUSED_FIELD,
        )
    focused = kind == "focused"
    return UIElement(
        index=index,
        text=text,
        class_name="android.widget.EditText" if focused else "android.widget.TextView",
        bounds=(x1, y1, x2, y2),
        clickable=True,
        editable=focused,
        focusable=focused,
        focused=focused,
    )


def _field_label(field: tuple[int, int, int, int], kept: Sequence[_Kept]) -> str | None:
    """The text that names an empty field, as a form is read: the nearest text line ending above
    the field (within one field height) that overlaps its columns, else the nearest text left of it
    on its row; None if there is none (the field keeps its generic label)."""
    x1, y1, x2, y2 = field
    height = y2 - y1
    above = [
        (y1 - b[3], b[4])
        for b in kept
        if b[5] == "text" and b[4] and 0 <= y1 - b[3] <= height and b[0] < x2 and x1 < b[2]
    ]
    left = [
        (x1 - b[2], b[4])
        for b in kept
        if b[5] == "text" and b[4] and 0 <= x1 - b[2] <= 2 * height and y1 <= (b[1] + b[3]) / 2 < y2
    ]
    for candidates in (above, left):
        if candidates:
            return min(candidates)[1]
    return None


def _reading_order(boxes: list[_Kept]) -> list[_Kept]:
    """Lines top to bottom, each left to right: a box joins the line above when its vertical
    centre lies within half that line's first box's height (labels of one row of icons differ by a
    few pixels, which a plain sort by centre would shuffle)."""
    lines: list[list[_Kept]] = []
    for box in sorted(boxes, key=lambda b: (b[1] + b[3], b[0])):
        if lines:
            first = lines[-1][0]
            if abs((box[1] + box[3]) - (first[1] + first[3])) <= (first[3] - first[1]):
                lines[-1].append(box)
                continue
        lines.append([box])
    return [box for line in lines for box in sorted(line, key=lambda b: b[0])]


def screen_observation(observation: Observation, elements: tuple[UIElement, ...]) -> Observation:
    """``observation`` seen through the screen: its elements and text are the OCR's, the UI dump
    is gone, and ``extras["observation"]`` says "screen"."""
    return dataclasses.replace(
        observation,
        elements=elements,
        ui_text=compact_tree(elements),
        ui_xml="",
        extras={**observation.extras, OBSERVATION_KEY: "screen"},
    )


def observation_kind(observation: Observation) -> ObservationKind:
    """Which observation ``observation`` is: "screen" when built from the screenshot, else "tree"."""
    return "screen" if observation.extras.get(OBSERVATION_KEY) == "screen" else "tree"


def as_executed(action: Action, observation: Observation) -> Action:
    """The action as the device gets it: under the screen observation an element tap (or long
    press) is one on the element's box centre, normalized; anything else is unchanged. An index
    past the elements stays as it is, for the environment to refuse as invalid."""
    if (
        observation_kind(observation) != "screen"
        or action.kind not in (ActionKind.TAP, ActionKind.LONG_PRESS)
        or action.index is None
        or action.index >= len(observation.elements)
    ):
        return action
    return Action(action.kind, point=observation.element_center_normalized(action.index))


def text_key(text: str) -> str:
    """``text`` as compared with what an OCR read: case-folded, letters and digits only (a reader
    may drop or add spaces and read ``|``, ``~`` or ``…`` at a cut as anything)."""
    return "".join(ch for ch in text.casefold() if ch.isalnum())


def find_text(elements: Sequence[UIElement], text: str, cutoff: float = 0.8) -> int | None:
    """The index of the element that reads ``text``: equal under ``text_key``, else the most similar
    with a similarity of at least ``cutoff`` (difflib's ratio), else one whose text starts ``text``'s
    where the screen cut it short (``Apex Tent Pro 2-pe~``); None when none does."""
    want = text_key(text)
    if not want:
        return None
    keys = [text_key(e.label) for e in elements]
    for i, key in enumerate(keys):
        if key == want:
            return i
    best, best_ratio = None, cutoff
    for i, key in enumerate(keys):
        ratio = difflib.SequenceMatcher(None, key, want).ratio() if key else 0.0
        if ratio >= best_ratio:
            best, best_ratio = i, ratio
    if best is not None:
        return best
    for i, key in enumerate(keys):
        if len(key) >= 4 and want.startswith(key[:-1] if len(key) > 4 else key):
            return i
    return None
