"""Numbers, clock times and percentages as people type them, for the free-text parser (``free_text``).

Pure functions over lowercased text. Number words become digits first ("half past seven" →
"half past 7", "forty-five percent" → "45 percent"), so each reading below is one pattern on digits.
"""

from __future__ import annotations

import re

from distrl_core.envs.number_words import digits, percents

# -- clock times -----------------------------------------------------------------------------------

_AFTER_DIGIT = r"(?:(?<=\d)|(?<=\d\s))"  # "7am", "7 am"; never the "am" of "I am"
_AM = rf"{_AFTER_DIGIT}a\.?\s?m\b\.?|in the morning|this morning|morning"
_PM = rf"{_AFTER_DIGIT}p\.?\s?m\b\.?|in the afternoon|this afternoon|in the evening|this evening|evening|at night|tonight"
_MERIDIEM = re.compile(rf"(?P<am>{_AM})|(?P<pm>{_PM})")
_MINUTES = r"(?P<minutes>quarter|half|\d{1,2})(?:\s+minutes?)?"
# Each reading of a time, tried in order; the first that matches decides.
_READINGS = (
    re.compile(r"\b(?P<h>\d{1,2})\s*[:.h]\s*(?P<m>\d{2})(?!\d)"),  # 7:15, 19:05, 7.15, 19h05, 5:45am
    re.compile(rf"\b{_MINUTES}\s+past\s+(?P<h>\d{{1,2}})\b"),  # half past 7, 10 past 6
    re.compile(rf"\b{_MINUTES}\s+(?:to|till|before)\s+(?P<h>\d{{1,2}})\b"),  # quarter to 8
    re.compile(r"\bhalf\s+(?P<h>\d{1,2})\b"),  # "half seven", British for 7:30
    re.compile(r"\bnoon\b|\bmidday\b|\bmidnight\b"),
    re.compile(r"\b(?P<h>\d{1,2})\s+(?P<m>\d{2})\b"),  # seven thirty, six oh five
    re.compile(r"\b(?P<h>\d{1,2})(?:\s*o'?\s?clock|\s*(?=a\.?\s?m\b|p\.?\s?m\b))"),  # 7 o'clock, 7am
    re.compile(r"\b(?:at|for|by)\s+(?P<h>\d{1,2})\b(?!\s*(?:%|percent|minutes|hours|seconds))"),  # at 7
    re.compile(r"\b(?P<h>[01]\d|2[0-3])(?P<m>[0-5]\d)\b"),  # 0630, 1905 (hours)
)


def _reading(text: str) -> tuple[int, int, bool] | None:
    """(hour as said, minute, whether the minutes run *to* that hour) of the first reading that
    matches; am/pm applies to the hour as said ("quarter to one pm" is 12:45)."""
    for i, pattern in enumerate(_READINGS):
        found = pattern.search(text)
        if found is None:
            continue
        named = found.groupdict()
        if i == 4:  # noon, midday, midnight: the hour is in the word
            return (0 if found.group() == "midnight" else 12), 0, False
        minutes = named.get("minutes")
        if i == 3:
            minute = 30
        elif minutes is not None:
            minute = {"quarter": 15, "half": 30}.get(minutes) or int(minutes)
        else:
            minute = int(named.get("m") or 0)
        return int(named["h"]), minute, i == 2
    return None


def clock_time(text: str) -> tuple[int, int] | None:
    """(hour 0-23, minute) of the first time of day in ``text`` (lowercased, number words allowed):
    "7:15 am", "19:05", "half past seven", "quarter to eight in the evening", "6 pm", "noon".
    A time that is no time of day ("25:00", "7:75") gives None, as does text without one."""
    text = digits(text)
    said = _reading(text)
    if said is None:
        return None
    hour, minute, before = said
    meridiem = _MERIDIEM.search(text)
    if meridiem is not None and 1 <= hour <= 12:
        if meridiem["pm"] and hour != 12:
            hour += 12
        elif meridiem["am"] and hour == 12:
            hour = 0
    if before and 0 < minute < 60 and 0 <= hour <= 24:
        hour, minute = (hour - 1) % 24, 60 - minute
    if not (0 <= hour <= 23 and 0 <= minute <= 59):
        return None
    return hour, minute


# -- percentages -----------------------------------------------------------------------------------


def percent(text: str) -> int | None:
    """The percentage ``text`` (lowercased) names: "40%", "forty percent", "to 40", "half", "full".
    May exceed 100: the caller says why that is no level."""
    found = percents(text)
    return found[0] if found else None
