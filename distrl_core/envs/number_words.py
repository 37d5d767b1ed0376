"""Number words as digits ("half past seven" → "half past 7", "forty-five" → "45"), so that a reader
of times, percentages or amounts matches one pattern on digits. Shared by the simulator's free-text
parser and the policy's typing candidates, which read the same instructions.
"""

from __future__ import annotations

import re

__all__ = ["digits"]

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
