"""Candidate actions for scoring policies: a pure function of (instruction, compact UI text).

The learner sees only the stored step rows, so whatever the collector's policy chose from must be
rebuildable from the row's ``instruction`` and ``observation_text`` alone: no device state, no
screenshot, no randomness. :func:`build_candidates` is that function. It offers

- a tap on every element that can be acted on (static labels stay in the prompt as context only),
- for sliders, a tap at each percentage the instruction names ("40%", "forty per cent", "to 40",
  "half", "max": ``number_words.percents``, the reading the simulator's parser uses too),
- when a text field is focused, a type action per instruction span (quoted strings, web addresses,
  the hour and the minute of a time, or, when nothing is quoted, the search query or product the
  words name; ``typing_spans`` reads those as people write them: "wake me at 6.30", "google best
  ramen in tokyo", "buy a yoga mat on trendbay"),
- the keys BACK, HOME and ENTER, the four direction swipes, and ``status(complete)``.

Every candidate carries ``text``: what the model reads. A tap names the element (class, label,
state; e.g. ``Switch Wi-Fi on``) rather than its index, so the model matches instruction words to labels instead of memorising
index numbers (docs/architecture.md, "Design notes": index-generating models never learned that).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from distrl_core.envs.actions import Action, ActionKind, format_action, parse_action, to_pixels
from distrl_core.envs.number_words import percents as percents_named
from distrl_core.policy.typing_spans import address_guesses, free_time, query_spans

__all__ = [
    "Candidate",
    "ScreenLine",
    "build_candidates",
    "find_candidate",
    "instruction_spans",
    "parse_compact_tree",
]

# `[index] Class "label" flags (x1,y1,x2,y2)` as written by envs.observation.compact_tree; labels
# never contain a double quote there (they are replaced by a single quote).
_LINE = re.compile(
    r'^\[(?P<index>\d+)\] (?P<cls>\S+) "(?P<label>[^"]*)"(?P<flags>(?: [a-z]+)*)'
    r"(?: \((?P<x1>-?\d+),(?P<y1>-?\d+),(?P<x2>-?\d+),(?P<y2>-?\d+)\))?$"
)
# Double quotes, or single quotes that open after a space and close before one ("google 'x y'";
# never the apostrophe of "jupiter's").
_QUOTED = re.compile(r"\"([^\"]+)\"|(?:^|(?<=\s))'([^']+)'(?=[\s,.?!;:]|$)")
_ADDRESS = re.compile(r"\b(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,}\b", re.IGNORECASE)
_TIME = re.compile(r"\b(\d{1,2}):(\d{2})(?:\s*([ap])\.?m\b\.?)?", re.IGNORECASE)
_SLIDER_CLASSES = ("SeekBar", "Slider")
KEYS = ("BACK", "HOME", "ENTER")
SWIPES = ("up", "down", "left", "right")


@dataclass(frozen=True, slots=True)
class ScreenLine:
    """One element line of the compact UI text."""

    index: int
    class_name: str
    label: str
    flags: tuple[str, ...]
    bounds: tuple[int, int, int, int] | None

    @property
    def static(self) -> bool:
        return "static" in self.flags

    @property
    def focused_field(self) -> bool:
        return "edit" in self.flags and "focused" in self.flags

    def describe(self) -> str:
        """The element as the model reads it: class, label and state flags (``static`` marks a
        plain label), without index, bounds or quotes: every token counts on a 2-core CPU, and
        the prompt's segment separators already delimit the label."""
        return " ".join([self.class_name, self.label, *self.flags]).replace("  ", " ")


@dataclass(frozen=True, slots=True)
class Candidate:
    """One action the policy may choose. ``line`` is the index of the UI line it acts on, if any;
    ``bounds`` that line's box in screen pixels (element taps), which a stored point tap is matched
    against (:func:`find_candidate`)."""

    action: Action
    text: str
    line: int | None = None
    bounds: tuple[int, int, int, int] | None = None

    @property
    def action_text(self) -> str:
        return format_action(self.action)


def parse_compact_tree(ui_text: str) -> list[ScreenLine]:
    """The element lines of ``compact_tree`` output; lines that do not parse are skipped."""
    lines = []
    for raw in ui_text.splitlines():
        match = _LINE.match(raw.strip())
        if match is None:
            continue
        bounds = None
        if match["x1"] is not None:
            bounds = (int(match["x1"]), int(match["y1"]), int(match["x2"]), int(match["y2"]))
        flags = tuple(match["flags"].split())
        lines.append(ScreenLine(int(match["index"]), match["cls"], match["label"], flags, bounds))
    return lines


def instruction_spans(instruction: str) -> list[tuple[str, str]]:
    """(kind, text) spans of the instruction that are worth typing, in order, without duplicates.

    Kinds: ``text`` (quoted), ``address`` (a web address such as shopmart.com, or ``name.com`` for
    a site named without one), ``hour`` and ``minute`` (of a time, the hour in 24-hour form: every
    h:mm time, then the first time written any other way), ``query`` (a search query or product,
    only when nothing is quoted: ``typing_spans.query_spans``).
    """
    spans: list[tuple[str, str]] = []
    quoted = [a or b for a, b in _QUOTED.findall(instruction)]
    spans += [("text", q.strip()) for q in quoted if q.strip()]
    unquoted = _QUOTED.sub(" ", instruction)
    spans += [("address", m.group(0).lower()) for m in _ADDRESS.finditer(unquoted)]
    spans += [("address", guess) for guess in address_guesses(unquoted)]
    for hour_text, minute_text, half in _TIME.findall(unquoted):
        hour, minute = int(hour_text), int(minute_text)
        if half:
            hour = hour % 12 + (12 if half.lower() == "p" else 0)
        if hour < 24 and minute < 60:
            spans += [("hour", str(hour)), ("minute", str(minute))]
    time = free_time(unquoted)
    if time is not None:
        spans += [("hour", str(time[0])), ("minute", str(time[1]))]
    if not quoted:
        spans += [("query", q) for q in query_spans(unquoted) if not _ADDRESS.fullmatch(q)]
    seen: set[str] = set()
    unique = []
    for kind, text in spans:
        if text not in seen:
            seen.add(text)
            unique.append((kind, text))
    return unique


def _slider_taps(line: ScreenLine, percents: list[int], screen_size: tuple[int, int]) -> list[Candidate]:
    if line.bounds is None:
        return []
    x1, y1, x2, y2 = line.bounds
    width, height = screen_size
    taps = []
    for percent in percents:
        # Aim at the centre of the pixel that maps to `percent` ((x - x1) / (x2 - x1 - 1)).
        x = (x1 + percent / 100 * (x2 - x1 - 1) + 0.5) / width
        y = (y1 + y2) / 2 / height
        if 0.0 <= x <= 1.0 and 0.0 <= y <= 1.0:
            action = Action.tap(point=(x, y))
            taps.append(Candidate(action, f"{line.describe()} at {percent} %", line.index))
    return taps


def build_candidates(
    instruction: str, ui_text: str, *, screen_size: tuple[int, int] = (1080, 2400)
) -> list[Candidate]:
    """All candidate actions for one step, deterministic and duplicate-free (by action text).

    ``screen_size`` is the pixel size the compact tree's bounds refer to; it is needed only to turn
    a slider position into a normalized tap point.
    """
    lines = parse_compact_tree(ui_text)
    percents = [p for p in percents_named(instruction.lower()) if p <= 100]
    candidates: list[Candidate] = []
    for line in lines:
        if line.static or "disabled" in line.flags:
            continue
        candidates.append(Candidate(Action.tap(line.index), line.describe(), line.index, line.bounds))
        if line.class_name in _SLIDER_CLASSES:
            candidates += _slider_taps(line, percents, screen_size)
    if any(line.focused_field for line in lines):
        for kind, text in instruction_spans(instruction):
            candidates.append(Candidate(Action.type_text(text), f"type {kind} {text}"))
    candidates += [Candidate(Action.press(key), f"key {key}") for key in KEYS]
    candidates += [Candidate(Action.swipe(d), f"swipe {d}") for d in SWIPES]
    candidates.append(Candidate(Action.complete(), "status complete"))
    seen: set[str] = set()
    unique = []
    for candidate in candidates:
        if candidate.action_text not in seen:
            seen.add(candidate.action_text)
            unique.append(candidate)
    return unique


def find_candidate(
    candidates: Sequence[Candidate], action_text: str, screen_size: tuple[int, int] = (1080, 2400)
) -> int | None:
    """Which candidate ``action_text`` (a stored action) is, None if none is.

    Its own text first. A tap on a point (what a phone gets: the screen observation stores an
    element tap as its box centre, ``distrl_core.envs.screen.as_executed``, and AutoUI-style
    policies emit points) is the element tap whose box holds the point, the box whose centre is
    nearest when boxes overlap: the element a phone would have hit.
    """
    for i, candidate in enumerate(candidates):
        if candidate.action_text == action_text:
            return i
    action = parse_action(action_text)
    if action.kind is not ActionKind.TAP or action.point is None:
        return None
    x, y = to_pixels(action.point, screen_size)
    best: tuple[float, int] | None = None
    for i, candidate in enumerate(candidates):
        if candidate.bounds is None or candidate.action.index is None:
            continue
        x1, y1, x2, y2 = candidate.bounds
        if x1 <= x < x2 and y1 <= y < y2:
            distance = ((x1 + x2) / 2 - x) ** 2 + ((y1 + y2) / 2 - y) ** 2
            if best is None or distance < best[0]:
                best = (distance, i)
    return None if best is None else best[1]
