"""Number words as digits ("half past seven" → "half past 7", "forty-five" → "45"), so that a reader
of times, percentages or amounts matches one pattern on digits. Shared by the simulator's free-text
parser and the policy's typing candidates, which read the same instructions.
"""

from __future__ import annotations

import re

__all__ = ["digits", "percents", "spelled"]

_UNITS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_TEENS = ("ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")  # fmt: skip
_TENS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_UNIT = "|".join(_UNITS)
_NUMBER_WORDS = re.compile(
    rf"\b(?:(?P<hundred>(?:a|one)[\s-]+hundred)"
    rf"|(?P<tens>{'|'.join(_TENS)})(?:[\s-]+(?P<tens_unit>{_UNIT}))?"
    rf"|(?P<teen>{'|'.join(_TEENS)})"
    rf"|(?:oh|o)[\s-]+(?P<oh_unit>{_UNIT})"  # "six oh five": the minutes of 6:05
    rf"|(?P<unit>zero|{_UNIT}))\b"
)


def _number(match: re.Match[str]) -> str:
    if match["hundred"]:
        return "100"
    if match["tens"]:
        value = 20 + 10 * _TENS.index(match["tens"])
        return str(value + (_UNITS.index(match["tens_unit"]) + 1 if match["tens_unit"] else 0))
    if match["teen"]:
        return str(10 + _TEENS.index(match["teen"]))
    if match["oh_unit"]:
        return f"0{_UNITS.index(match['oh_unit']) + 1}"
    return "0" if match["unit"] == "zero" else str(_UNITS.index(match["unit"]) + 1)


def digits(text: str) -> str:
    """``text`` (lowercased) with its number words written as digits."""
    return _NUMBER_WORDS.sub(_number, text)


def spelled(n: int) -> str:
    """``n`` (0-100) in words, "forty-five": what :func:`digits` reads back as ``str(n)``."""
    if not 0 <= n <= 100:
        raise ValueError(f"spelled() writes 0 to 100, got {n}")
    if n == 100:
        return "one hundred"
    if n < 20:
        return "zero" if n == 0 else _UNITS[n - 1] if n < 10 else _TEENS[n - 10]
    tens, ones = divmod(n, 10)
    return _TENS[tens - 2] + (f"-{_UNITS[ones - 1]}" if ones else "")


# -- percentages -----------------------------------------------------------------------------------

_PERCENT = re.compile(r"\b(?P<n>\d{1,3})\s*(?:%|percent\b|per\s?cent\b|pct\b)")
_LEVEL = re.compile(r"\b(?:to|at|of)\s+(?P<n>\d{1,3})\b(?!\s*(?:am|pm|:))")  # "brightness to 40"
_LEVEL_WORDS = {
    "half": 50, "full": 100, "max": 100, "maximum": 100, "highest": 100,
    "min": 0, "minimum": 0, "lowest": 0,
}  # fmt: skip


def percents(text: str) -> list[int]:
    """Every percentage ``text`` (lowercased) names, the surest reading first: "40%", "forty
    percent" and "40 per cent" first, then a level after "to"/"at"/"of" ("brightness to 40"), then
    words ("half", "full", "max"). Values may exceed 100: the caller says why that is no level.

    The simulator's parser takes the first as the task's level; the policy offers a slider tap at
    each, so a person's "dim it to forty" reaches the same point as the template's "40%"."""
    text = digits(text)
    found = [int(m["n"]) for pattern in (_PERCENT, _LEVEL) for m in pattern.finditer(text)]
    found += [_LEVEL_WORDS[word] for word in re.findall(r"[a-z]+", text) if word in _LEVEL_WORDS]
    return list(dict.fromkeys(found))
