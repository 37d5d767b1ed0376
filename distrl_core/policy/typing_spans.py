"""What a person's free instruction asks to have typed: a time of day, a search query, a product,
a shop's web address, read from the words alone.

:func:`distrl_core.policy.candidates.instruction_spans` offers these as typing candidates beside the
quoted text and h:mm times the generator's templates put in known places. Without them a typed
instruction such as "wake me at 6.30" or "google best ramen in tokyo" has no candidate with the
text the task needs, and no policy can succeed on it. The readings follow the SimDroid free-text
parser (``simulators/simdroid/free_text.py``, ``free_numbers.py``) but live here because the core
never imports the simulator; they err towards offering a second variant of a query (with and
without a trailing place or article) rather than missing the one the task needs.
"""

from __future__ import annotations

import re

from distrl_core.envs.number_words import digits

__all__ = ["address_guesses", "free_time", "query_spans"]

# -- numbers and times -----------------------------------------------------------------------------

_AM_PM = r"(?:(?<=\d)|(?<=\d\s))(?P<half>[ap])\.?\s?m\b\.?"  # "7am", "7 a.m."; never the "am" of "I am"
_MERIDIEM = re.compile(
    rf"{_AM_PM}|(?P<morning>\bmorning\b)|(?P<evening>\b(?:afternoon|evening|tonight|at\s+night)\b)"
)
# Readings that need a word saying a time of day is meant: "at 9" or "7.15" alone may be a price,
# a count or a version.
_TIME_CUE = re.compile(
    rf"\b(?:alarms?|wake|wakeup|waking|o'?clock|morning|afternoon|evening|tonight|night|noon|midday"
    rf"|midnight|remind|timer|past|till)\b|{_AM_PM}"
)
_MINUTES = r"(?P<minutes>quarter|half|\d{1,2})(?:\s+minutes?)?"
_READINGS = (  # tried in order, the first that matches decides (as free_numbers.clock_time does)
    re.compile(r"\b(?P<h>\d{1,2})\s*[:.h]\s*(?P<m>\d{2})(?!\d)"),  # 7:15, 7.15, 18h30, 5:45am
    re.compile(rf"\b{_MINUTES}\s+past\s+(?P<h>\d{{1,2}})\b"),  # quarter past 7
    re.compile(rf"\b{_MINUTES}\s+(?:to|till|before)\s+(?P<to>\d{{1,2}})\b"),  # ten to 8
    re.compile(r"\bhalf\s+(?P<half_h>\d{1,2})\b"),  # "half six", British for 6:30
    re.compile(r"\b(?P<word>noon|midday|midnight)\b"),
    re.compile(r"\b(?P<h>\d{1,2})\s+(?P<m>\d{2})\b"),  # seven thirty, six oh five
    re.compile(r"\b(?P<h>\d{1,2})(?:\s*o'?\s?clock|\s*(?=[ap]\.?\s?m\b))"),  # 8 o'clock, 5am
    re.compile(r"\b(?:at|for|by|to)\s+(?P<h>\d{1,2})\b(?!\s*(?:%|percent|minutes|hours|seconds|[:.]\d))"),
    re.compile(r"\b(?P<h>[01]\d|2[0-3])(?P<m>[0-5]\d)\b"),  # 0630
)


def _said(text: str) -> tuple[int, int, bool] | None:
    """(hour as said, minute, whether the minutes run *to* that hour) of the first reading that
    matches; am/pm applies to the hour as said ("quarter to one pm" is 12:45)."""
    for pattern in _READINGS:
        found = pattern.search(text)
        if found is None:
            continue
        named = {k: v for k, v in found.groupdict().items() if v is not None}
        if "word" in named:
            return (0 if named["word"] == "midnight" else 12), 0, False
        if "half_h" in named:
            return int(named["half_h"]), 30, False
        minute = {"quarter": 15, "half": 30}.get(named.get("minutes", ""))
        minute = minute if minute is not None else int(named.get("minutes") or named.get("m") or 0)
        return int(named.get("to") or named["h"]), minute, "to" in named
    return None


def free_time(instruction: str) -> tuple[int, int] | None:
    """(hour 0-23, minute) of the first time of day the instruction names, written any way people
    write one ("6.30", "quarter past seven", "5am", "ten to eight in the evening", "noon"); None
    when there is none or nothing says a time is meant (an h:mm time always is)."""
    text = digits(instruction.lower())
    if not _TIME_CUE.search(text) and not re.search(r"\b\d{1,2}:\d{2}(?!\d)", text):
        return None
    said = _said(text)
    if said is None:
        return None
    hour, minute, before = said
    meridiem = _MERIDIEM.search(text)
    if meridiem is not None and 1 <= hour <= 12:
        pm = meridiem["half"] == "p" if meridiem["half"] else bool(meridiem["evening"])
        hour = hour % 12 + (12 if pm else 0)
    if before and 0 < minute < 60:
        hour, minute = (hour - 1) % 24, 60 - minute
    if not (0 <= hour <= 23 and 0 <= minute <= 59):
        return None
    return hour, minute


# -- queries and products --------------------------------------------------------------------------

_SEARCH_VERB = r"(?:search(?:\s+up)?|go{1,2}g(?:le|el|l)|bing|look(?:ing)?\s+up)"
_QUERY_CUES = (
    re.compile(rf"\b{_SEARCH_VERB}\b\s*:?\s*(?P<q>.+)"),
    re.compile(r"\bfind\s+(?:me\s+|out\s+)?(?P<q>.+)"),
    re.compile(r"\bwhat\s+(?:does|do)\s+the\s+(?:web|internet)\s+(?:say|have)\s+(?:about|on)\s+(?P<q>.+)"),
    re.compile(r"\blook\s+(?P<q>.+?)\s+up\b"),  # "look the bus timetable up"
    re.compile(r"\b(?:search|browse|check)\s+[\w.-]+\s+for\s+(?P<q>.+)"),  # "search megastore for ..."
)
# Buying verbs name a product only where the words are about shopping ("add an alarm" is no product).
_SHOPPING = re.compile(
    r"\b(?:buy|purchase|order|cart|basket|trolley|shop|store|website|site|get\s+me\s+(?:a|an|some))\b|\.com\b"
)
_PRODUCT_CUES = (
    re.compile(r"\b(?:buy|purchase|order|get\s+me|add|put|show\s+me|shop\s+for|look(?:ing)?\s+for)\s+(?P<q>.+)"),
)  # fmt: skip
# What stands between the cue and the query ("search the web for", "find me some info about").
_LEAD = re.compile(
    rf"^(?:{_SEARCH_VERB}\s+|search\s+)?(?:(?:the\s+)?(?:web|internet|net|online|google|chrome)\s+)?"
    r"(?:(?:some\s+)?(?:web\s+|online\s+)?(?:results?|info|information|pages|articles|stuff)\s+)?"
    r"(?:(?:for|about|on|regarding)\s+)?:?\s*"
)
_TRAILING = re.compile(
    r"(?:\s+(?:on|using|with|in|via|through)\s+(?:google|chrome|bing|the\s+(?:web|internet|browser)))?"
    r"(?:\s+(?:online|on\s+the\s+(?:web|internet)|for\s+me|please|pls|plz|thx|cheers|right\s+now|now"
    r"|thanks(?:\s+(?:a\s+lot|so\s+much))?|thank\s+(?:you|u)(?:\s+(?:very|so)\s+much)?))*$"
)
_CLAUSE_END = re.compile(r"[,;!?]|\.(?:\s|$)")  # a comma or a full stop ends the query
# Where a product's name ends ("add hdmi cable to my cart on megastore.com"); a web query keeps
# its places ("cheap hotels in lisbon") and only loses a one-word site at its end ("... at shopmart").
_PLACE = re.compile(r"\s+(?:on|at|from|in|into|to|and|then|via|using|over)\b.*$")
_SITE_TAIL = re.compile(r"\s+(?:on|at|from)\s+\S+$")
_ARTICLE = re.compile(r"^(?:a|an|some)\s+")
_PRODUCT_LEAD = re.compile(  # "the top result for laptop sleeve"
    r"^(?:(?:a|an|the|some)\s+)?(?:(?:first|top|1st|best)\s+)?(?:(?:result|item|hit|match|one)s?\s+(?:for|of)\s+)?"
)
_NOT_A_QUERY = re.compile(r"^(?:it|one|that|this|something|me|us|out|up|to|on|for|about|the|a|an)?$")
_SITE_FOR = re.compile(r"^[\w.-]+\s+for\s+(.+)$")
MAX_QUERIES = 4  # the policy scores every candidate: a few variants, not every substring


def _web_query(rest: str) -> str:
    query = _CLAUSE_END.split(rest, maxsplit=1)[0]
    query = _TRAILING.sub("", _LEAD.sub("", query.strip()))
    return " ".join(query.strip(" \"'").split())


def query_spans(instruction: str) -> list[str]:
    """Texts to type for a search or a product, at most ``MAX_QUERIES``: the words after a search cue
    as a web search takes them ("google best ramen in tokyo please" → "best ramen in tokyo"), the
    same without a one-word site at the end or an article ("find a desk lamp at shopmart" → "desk
    lamp"), and, where the words are about shopping, the product a buying verb names ("buy a yoga
    mat on trendbay" → "yoga mat"). For instructions that quote nothing (quoted text is typed as is)."""
    text = " ".join(instruction.lower().split())
    found: list[str] = []
    for pattern in _QUERY_CUES:
        for match in pattern.finditer(text):
            web = _web_query(match["q"])
            found += [web, _ARTICLE.sub("", _SITE_TAIL.sub("", web))]
    for pattern in _PRODUCT_CUES if _SHOPPING.search(text) else ():
        for match in pattern.finditer(text):
            found.append(_PRODUCT_LEAD.sub("", _PLACE.sub("", _web_query(match["q"]))))
    unique = [q for q in dict.fromkeys(found) if not _NOT_A_QUERY.match(q)]
    # "search amazon for a kettle" also reads "amazon for a kettle" after "search": drop it.
    site_for = [q for q in unique if (m := _SITE_FOR.match(q)) and m[1] in unique]
    return [q for q in unique if q not in site_for][:MAX_QUERIES]


# -- web addresses people leave out ----------------------------------------------------------------

_NOT_A_SITE = frozenset({
    "google", "chrome", "bing", "web", "internet", "browser", "phone", "device", "screen", "home",
    "settings", "cart", "basket", "trolley", "bag", "my", "the", "this", "that", "it", "them", "me",
    "first", "top", "best", "results", "search", "online", "play", "app", "apps",
})  # fmt: skip
_SITE_WORD = r"(?P<site>[a-z][a-z0-9-]{3,})"
_SITE_NAMED = (
    re.compile(rf"\b{_SITE_WORD}\s+(?:website|web\s+site|site|store|shop|homepage)\b"),  # the buyzilla website
    re.compile(rf"\b(?:search|browse|check)\s+{_SITE_WORD}\s+for\b"),  # search megastore for
    # Not "open X": the generator's "Open Calendar" would offer calendar.com.
    re.compile(rf"^(?:please\s+)?(?:visit|go\s+to|take\s+me\s+to|head\s+to|navigate\s+to)\s+{_SITE_WORD}(?:\s+please)?$"),
)  # fmt: skip
# "on trendbay" names a site only where the words shop or search ("switch on wi-fi" does not).
_SITE_AFTER = re.compile(
    rf"\b(?:on|at|from)\s+{_SITE_WORD}(?=\s*(?:$|[,.;!?]|\s+(?:and|then|search|in|into|to)\b))"
)
_SHOP_OR_SEARCH = re.compile(
    rf"{_SHOPPING.pattern}|\b(?:{_SEARCH_VERB}|find|look(?:ing)?\s+for|show\s+me|browse)\b"
)
_DOMAIN = re.compile(r"\b[a-z0-9-]+\.[a-z]{2,}\b")


def address_guesses(instruction: str) -> list[str]:
    """``name.com`` for a site the instruction names without its address ("go to shopmart", "buy a
    yoga mat on trendbay"); none when it writes an address itself."""
    text = " ".join(instruction.lower().split())
    if _DOMAIN.search(text):
        return []
    patterns = (*_SITE_NAMED, _SITE_AFTER) if _SHOP_OR_SEARCH.search(text) else _SITE_NAMED
    names = [m["site"] for pattern in patterns for m in pattern.finditer(text)]
    return [f"{name}.com" for name in dict.fromkeys(names) if name not in _NOT_A_SITE][:2]
