"""Typing slips in the words the free-text parser acts on ("opne the clock", "googel tacos", "turn
on bluetoth"), put right before a second reading (``free_text.parse_instruction``).

A word is put right only where it is no word the parser knows and lies one slip from exactly one
that it does: a swap of two neighbouring letters for a 4-letter word (a slipped letter in a word
that short too often makes another real word: "make" is no "wake"), one letter added, dropped,
changed or swapped from 5 letters on, two from 8 on. Words after a search or buying verb are the
query or product and are left as typed, as is anything quoted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["slips", "spelled"]

# Words after these are what a person wants found or bought: never "corrected".
_QUERY_VERBS = frozenset(
    {"search", "google", "bing", "find", "look", "buy", "purchase", "order", "add", "put"}
)
_WORD = re.compile(r"[a-z]+|[\"']")


def slips(a: str, b: str, limit: int) -> int:
    """Edits (insert, delete, change, swap of neighbours) from ``a`` to ``b``; ``limit + 1`` once
    more than ``limit`` are needed."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    before: list[int] = []
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        now = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            now[j] = min(row[j] + 1, now[j - 1] + 1, row[j - 1] + (x != y))
            if i > 1 and j > 1 and x == b[j - 2] and a[i - 2] == y:
                now[j] = min(now[j], before[j - 2] + 1)
        before, row = row, now
        if min(row) > limit:
            return limit + 1
    return min(row[-1], limit + 1)


def _allowed(word: str, known: str) -> bool:
    if len(word) < 4:
        return False
    if len(word) == 4:  # only two neighbouring letters swapped
        return len(known) == 4 and sorted(word) == sorted(known) and slips(word, known, 1) == 1
    return slips(word, known, 2 if len(word) >= 8 else 1) <= (2 if len(word) >= 8 else 1)


def spelled(text: str, vocabulary: Iterable[str]) -> str:
    """``text`` (lowercased) with each slipped word of the parser's own put right, up to the first
    search or buying verb or quote."""
    known = frozenset(vocabulary)
    parts: list[str] = []
    end = 0
    for match in _WORD.finditer(text):
        word = match.group()
        if word in "\"'":
            break
        if word not in known:
            close = [k for k in known if _allowed(word, k)]
            if len(close) == 1:
                parts.append(text[end : match.start()] + close[0])
                end = match.end()
                word = close[0]
        if word in _QUERY_VERBS:
            break
    return "".join(parts) + text[end:]
