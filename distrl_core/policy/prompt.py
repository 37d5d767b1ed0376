"""Prompts: what the model reads, built only from what a stored step row also holds.

Scoring prompt (one sequence per step; every candidate is a segment the model pools and scores)::

    task : <instruction> | did : <previous action> | TextView Results for 'tent' static |
    TextView Apex Tent Pro $12.00 | ... | type text tent | key BACK | ... | status complete

Static elements appear as context segments (marked ``static``); every other element is a tap
candidate, in screen order, then the non-element candidates, so that with causal attention the
keys and swipes see the whole screen. Bounds and quotes are left out: they cost many tokens and
the order and the separators already say where things are and where a label ends.

Generative prompt: the instruction, the previous actions and the compact tree without bounds,
ending in ``action :`` for the model to continue.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from distrl_core.policy.candidates import (
    Candidate,
    ScreenLine,
    build_candidates,
    find_candidate,
    parse_compact_tree,
)
from distrl_core.policy.tokenizer import match_flags

__all__ = [
    "PROMPT_WORDS",
    "EncodedStep",
    "encode_scoring_step",
    "generative_prompt",
    "last_actions",
    "scoring_segments",
]

SEPARATOR = " | "
PROMPT_WORDS = ("task", "did", "action", "|", ":", "at", "%")  # fixed words the tokenizer must know
_BOUNDS_SUFFIX = re.compile(r" \(-?\d+,-?\d+,-?\d+,-?\d+\)$")


@dataclass(frozen=True)
class EncodedStep:
    """A tokenized scoring prompt. Spans are [start, end) model positions of each candidate, and
    ``instruction_end`` one position: a token's own place, or with ``word_of`` its word's."""

    input_ids: tuple[int, ...]
    flags: tuple[int, ...]
    spans: tuple[tuple[int, int], ...]
    instruction_end: int  # position of the instruction's last token
    candidates: tuple[Candidate, ...]
    # (first, end, label) of each screen element's segment with a non-empty label, in prompt order
    # (tap candidates and static context lines alike): what ``policy.semantic_match`` compares to
    # the instruction. Built from the same (instruction, ui_text, history) as the prompt.
    elements: tuple[tuple[int, int, str], ...] = ()
    # One semantic-match index per token (``policy.semantic_match``), None when the policy has none.
    semantic: tuple[int, ...] | None = None
    # (first, end, text) of every segment, in prompt order: what ``policy.context_states`` reads
    # each segment's contextual states from (its text alone) and where it places them.
    segments: tuple[tuple[int, int, str], ...] = ()
    # With word pooling (``SubwordSettings.pool_words``): each token's model position, the number of
    # its word (non-decreasing from 0); None when every token is a position of its own. ``elements``
    # and ``segments`` index tokens either way.
    word_of: tuple[int, ...] | None = None

    @property
    def positions(self) -> int:
        """How many positions the model reads: tokens, or words when they are pooled."""
        if self.word_of is None:
            return len(self.input_ids)
        return self.word_of[-1] + 1 if self.word_of else 0

    def index_of(self, action_text: str, screen_size: tuple[int, int] = (1080, 2400)) -> int | None:
        """Which candidate is ``action_text`` (canonical action text; a point tap is the element
        tap it lands on: ``find_candidate``), None if none is."""
        return find_candidate(self.candidates, action_text, screen_size)


def scoring_segments(
    instruction: str,
    ui_text: str,
    history: Sequence[str],
    screen_size: tuple[int, int],
) -> tuple[list[str], list[int | None], list[Candidate]]:
    """Segment texts in prompt order, and for each segment its candidate number (None = context)."""
    segments, owners, _, candidates = _segments_with_lines(instruction, ui_text, history, screen_size)
    return segments, owners, candidates


def _segments_with_lines(
    instruction: str,
    ui_text: str,
    history: Sequence[str],
    screen_size: tuple[int, int],
) -> tuple[list[str], list[int | None], list[ScreenLine | None], list[Candidate]]:
    """``scoring_segments`` plus, per segment, the screen line it shows (None: not an element)."""
    candidates = build_candidates(instruction, ui_text, screen_size=screen_size)
    by_line: dict[int, list[int]] = {}
    loose: list[int] = []
    for number, candidate in enumerate(candidates):
        (by_line.setdefault(candidate.line, []) if candidate.line is not None else loose).append(number)
    segments = [f"task : {instruction}"]
    owners: list[int | None] = [None]
    lines: list[ScreenLine | None] = [None]
    for action in history:
        segments.append(f"did : {action}")
        owners.append(None)
        lines.append(None)
    for line in parse_compact_tree(ui_text):
        numbers = by_line.get(line.index)
        if numbers:
            segments += [candidates[n].text for n in numbers]
            owners += numbers
            lines += [line] * len(numbers)
        else:
            segments.append(line.describe())
            owners.append(None)
            lines.append(line)
    segments += [candidates[n].text for n in loose]
    owners += loose
    lines += [None] * len(loose)
    return segments, owners, lines, candidates


def encode_scoring_step(
    tokenizer: Any,
    instruction: str,
    ui_text: str,
    history: Sequence[str] = (),
    *,
    screen_size: tuple[int, int] = (1080, 2400),
    max_tokens: int | None = None,
    pool_words: bool = False,
) -> EncodedStep:
    """Tokenize one scoring prompt and locate every candidate's tokens (any fast tokenizer). With
    ``pool_words`` the model reads one position per word of the tokenizer's pre-tokenizer (its
    pieces' inputs averaged): spans and ``instruction_end`` are then word positions
    (``EncodedStep.word_of``), and ``max_tokens`` bounds the words."""
    segments, owners, lines, candidates = _segments_with_lines(instruction, ui_text, history, screen_size)
    text_parts: list[str] = []
    char_spans: list[tuple[int, int]] = []
    position = 0
    for i, segment in enumerate(segments):
        if i:
            text_parts.append(SEPARATOR)
            position += len(SEPARATOR)
        char_spans.append((position, position + len(segment)))
        text_parts.append(segment)
        position += len(segment)
    text = "".join(text_parts)
    encoding = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    ids: list[int] = encoding["input_ids"]
    offsets: list[tuple[int, int]] = [tuple(o) for o in encoding["offset_mapping"]]
    word_of = _word_positions(encoding.word_ids()) if pool_words else None
    instruction_chars = char_spans[0][1]
    flags = match_flags(text, offsets, instruction, instruction_chars)
    token_spans: list[tuple[int, int]] = [(0, 0)] * len(candidates)
    instruction_end = 0
    elements: list[tuple[int, int, str]] = []
    segment_tokens = _segment_tokens(char_spans, offsets)
    for (first, last), (start_char, _), owner, line in zip(
        segment_tokens, char_spans, owners, lines, strict=True
    ):
        if line is not None and line.label.strip() and last > first:
            elements.append((first, last, line.label.strip()))
        if owner is not None:
            if last <= first:
                raise ValueError(f"candidate {candidates[owner].text!r} produced no tokens")
            token_spans[owner] = (first, last)
        elif start_char == 0:
            instruction_end = max(last - 1, 0)
    placed = tuple(
        (first, last, segment) for (first, last), segment in zip(segment_tokens, segments, strict=True)
    )
    if word_of is not None:
        token_spans = [(word_of[first], word_of[last - 1] + 1) for first, last in token_spans]
        instruction_end = word_of[instruction_end]
    step = EncodedStep(
        tuple(ids),
        tuple(flags),
        tuple(token_spans),
        instruction_end,
        tuple(candidates),
        tuple(elements),
        segments=placed,
        word_of=None if word_of is None else tuple(word_of),
    )
    if max_tokens is not None and step.positions > max_tokens:
        raise ValueError(
            f"the scoring prompt has {step.positions} positions, more than the model's {max_tokens}; "
            "raise TinyModelConfig.max_positions (or use a base with a longer context)"
        )
    return step


def _word_positions(word_ids: Sequence[int | None]) -> list[int]:
    """Each token's word number, counted from 0 in prompt order (a token outside any word, which a
    prompt without special tokens never has, is a word of its own)."""
    out: list[int] = []
    previous: int | None = None
    for word in word_ids:
        if not out:
            out.append(0)
        elif word is None or word != previous:
            out.append(out[-1] + 1)
        else:
            out.append(out[-1])
        previous = word
    return out


def _segment_tokens(
    char_spans: Sequence[tuple[int, int]], offsets: Sequence[tuple[int, int]]
) -> list[tuple[int, int]]:
    """[first, last) token positions of each segment, from its characters and the tokens' offsets."""
    out = []
    cursor = 0
    for start_char, end_char in char_spans:
        first = cursor
        while first < len(offsets) and offsets[first][1] <= start_char:
            first += 1
        last = first
        while last < len(offsets) and offsets[last][0] < end_char:
            last += 1
        cursor = last
        out.append((first, last))
    return out


def last_actions(history: Sequence[str], count: int) -> tuple[str, ...]:
    """The last ``count`` actions of an episode's history (none when count is 0)."""
    return tuple(history[-count:]) if count > 0 else ()


def generative_prompt(instruction: str, ui_text: str, history: Sequence[str]) -> str:
    lines = [f"task: {instruction}"]
    lines += [f"did: {action}" for action in history]
    lines += [_BOUNDS_SUFFIX.sub("", line) for line in ui_text.splitlines()]
    lines.append("action:")
    return "\n".join(lines)
