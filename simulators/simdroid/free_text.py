"""Instructions a person types, read as SimDroid tasks the rules can judge.

``parse_instruction`` reads free text as one of the generator's task kinds with the parameters a
person names (an app, a setting and on/off, an alarm time, a search query, a brightness level, a
shop site and product); ``free_task.make_task`` completes those as the generator does. Where no kind
fits, the answer says what was missing, so `distrl run` can say why no verdict is possible.

Each reader below looks for one kind. A reader that recognises its kind but misses a part (an
alarm without a time) gives a reason and the next reader still tries ("open my alarms" is no alarm
to set but opens Clock); the first reason is what a person hears when nothing fits.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from simulators.simdroid.catalog import APPS, SHOP_BY_DOMAIN, SHOPS, normalize_query
from simulators.simdroid.free_numbers import clock_time, percent
from simulators.simdroid.free_spelling import spelled
from simulators.simdroid.task_text import TOGGLE_NAMES

__all__ = ["APP_WORDS", "SETTING_WORDS", "NotParsed", "Parsed", "parse_instruction"]


@dataclass(frozen=True)
class Parsed:
    kind: str
    params: dict[str, Any] = field(default_factory=dict)  # what a person names: free_task.KINDS[kind]


@dataclass(frozen=True)
class NotParsed:
    reason: str  # what could not be recognised, for a person


# What people call the apps besides their names (matched as whole words, longest first).
APP_WORDS: dict[str, tuple[str, ...]] = {
    "Settings": ("setting", "system settings", "phone settings", "device settings", "preferences"),
    "Clock": ("alarms", "alarm clock", "timer", "stopwatch", "world clock"),
    "Chrome": ("google chrome", "browser", "web browser", "internet browser"),
    "Camera": ("cam", "take a photo", "take a picture", "take a selfie", "selfie"),
    "Gmail": ("email", "emails", "e-mail", "mail", "inbox", "mailbox"),
    "Maps": ("map", "google maps", "navigation", "directions"),
    "Photos": ("photo", "google photos", "gallery", "photo gallery", "gallery of pictures", "pictures", "pics",
               "photo album", "albums", "images", "camera roll"),
    "Calendar": ("google calendar", "agenda", "my schedule", "appointments"),
    "Contacts": ("contact list", "address book", "phone book", "phonebook"),
    "Messages": ("messaging", "texts", "text messages", "sms", "chats"),
    "Phone": ("dialer", "dialler", "dial pad", "dialpad", "call log", "recent calls"),
    "YouTube": ("you tube", "videos"),
    "Files": ("file manager", "file browser", "downloads", "my files"),
    "Calculator": ("calc",),
    "Play Store": ("google play", "app store", "playstore", "play store"),
    "Drive": ("google drive", "cloud storage"),
    "Music": ("music player", "songs", "my playlists", "playlist"),
    "Notes": ("notepad", "note", "memo", "memos"),
    "Weather": ("forecast", "weather forecast"),
    "Recorder": ("voice recorder", "sound recorder", "audio recorder", "voice memos", "dictaphone"),
    "Translate": ("translator", "google translate"),
    "Fitness": ("google fit", "workout", "workouts", "step counter", "activity tracker"),
    "Podcasts": ("podcast",),
    "News": ("headlines", "google news"),
}  # fmt: skip
# What people call the switches besides the generator's names (``TOGGLE_NAMES``).
SETTING_WORDS: dict[str, tuple[str, ...]] = {
    "wifi": ("wifi", "wi fi", "wireless", "wlan"),
    "airplane": ("airplane", "aeroplane mode", "flight mode", "plane mode", "aeroplane"),
    "mobile_data": ("cellular data", "cell data", "cellular", "data", "mobile internet", "4g", "5g", "lte"),
    "bluetooth": ("bt",),
    "nfc": ("near field communication", "contactless"),
    "dark_theme": ("dark mode", "night mode", "dark ui"),
    "auto_rotate": ("auto rotate", "autorotate", "auto-rotation", "auto rotation", "screen rotation", "rotation",
                    "auto-rotate screen"),
    "dnd": ("do-not-disturb", "dnd"),
    "location": ("location services", "gps"),
    "battery_saver": ("power saving", "power saver", "battery saving", "low power mode", "battery saver mode"),
}  # fmt: skip


class _Phrases:
    """Whole-word phrases, each naming a key; the longest phrase wins where two overlap."""

    def __init__(self, phrases: Mapping[str, tuple[str, ...]]) -> None:
        self._key = {phrase.lower(): key for key, words in phrases.items() for phrase in words}
        ordered = sorted(self._key, key=len, reverse=True)
        self.pattern = re.compile(rf"(?<![\w-])(?:{'|'.join(map(re.escape, ordered))})(?![\w-])")

    def keys(self, text: str) -> list[str]:
        """The keys whose phrases ``text`` holds, each once, in order."""
        return list(dict.fromkeys(self._key[m.group()] for m in self.pattern.finditer(text)))

    def sub(self, replacement: str, text: str) -> str:
        return self.pattern.sub(replacement, text)


_APPS = _Phrases({app.name: (app.name, *APP_WORDS[app.name]) for app in APPS})
_SETTINGS = _Phrases({key: (TOGGLE_NAMES[key], *words) for key, words in SETTING_WORDS.items()})


# -- shared pieces ---------------------------------------------------------------------------------

_QUOTED = re.compile(r"\"([^\"]+)\"|(?:^|(?<=\s))'([^']+)'(?=[\s,.?!;:]|$)")
_ON_PHONE = re.compile(
    r"\b(?:on|of|in|from)\s+(?:my|the|this)\s+(?:phone|device|mobile)\b|\b(?:my|the)\s+phone'?s\b"
)
_TRAILING = re.compile(
    r"(?:\s+(?:on|using|with|in|via|through)\s+(?:google|chrome|bing|the\s+(?:web|internet|browser)))?"
    r"(?:[\s.?!,;]+(?:online|on\s+the\s+(?:web|internet)|for\s+me|right\s+now|now|pls|plz|please|thx|cheers"
    r"|thanks(?:\s+(?:a\s+lot|so\s+much))?|thank\s+(?:you|u)(?:\s+(?:very|so)\s+much)?))*"
    r"[\s.?!,;]*$"
)


_QUOTES = str.maketrans("“”‘’", "\"\"''")


def _normalise(text: str) -> str:
    text = text.translate(_QUOTES)
    return " ".join(text.lower().split())


def _quoted(text: str) -> str | None:
    match = _QUOTED.search(text)
    return normalize_query(match[1] or match[2]) if match else None


def _clean_query(query: str) -> str:
    return normalize_query(_TRAILING.sub("", query).strip("\"' "))


def _listing(names: list[str]) -> str:
    return ", ".join(names)


# -- shops -----------------------------------------------------------------------------------------

_SHOP_NAMES = {site.domain: (site.domain, site.domain.removesuffix(".com"), site.title.lower(),
               re.sub(r"(?<=[a-z])(?=[A-Z])", " ", site.title).lower()) for site in SHOPS}  # fmt: skip
_SHOPS = _Phrases(_SHOP_NAMES)
_SHOP_KEYS = list(_SHOP_NAMES)
_DOMAIN = re.compile(r"\b(?:www\.)?([a-z0-9-]+\.(?:com|net|org|io|co\.uk|de|fr|shop|store))\b")
_CART = re.compile(r"\b(?:cart|basket|trolley|bag|buy|purchase|order)\b")
_PRODUCT_AFTER = (
    re.compile(r"\b(?:search(?:\s+up)?(?:\s+for)?|look(?:ing)?\s+(?:up|for)|find(?:\s+me)?|show\s+me|shop\s+for|browse\s+for|hunt\s+for|results?\s+for)\s+(?P<q>.+)"),
    re.compile(r"\b(?:buy(?:\s+me)?|purchase|order|get(?:\s+me)?|add|put)\s+(?P<q>.+)"),
)  # fmt: skip
_PRODUCT_END = re.compile(r"\s+(?:on|at|from|in|into|to|and|then|via|using|over)(?:\s.*)?$|\s*[,;].*$")
_NOT_A_PRODUCT = re.compile(
    r"^(?:the\s+)?(?:first|top|1st|best)\b|^(?:it|one|that|this|something|them|around|everything|anything)$"
    r"|^(?:to|on|at|from|in|into|and|then|what|how|where)\b"
    r"|^(?:my|the|your)\s+(?:cart|basket|trolley|bag|orders?|site|website|page|home\s?page|store|shop)$"
)
# "the first phone charger": a determiner before a product, not "the first result (for ...)".
_ORDINAL = re.compile(
    r"^(?:the\s+)?(?:first|1st)\s+(?!(?:result|item|hit|match|one|product|listing|entry|option)s?\b)(?=\w)"
)
_ARTICLES = re.compile(r"^(?:(?:me|us)\s+)?(?:(?:a|an|the|some|one)\s+)?")


def _product(text: str) -> str | None:
    """The product a shop instruction names: quoted, or after a search (then a buying) verb."""
    quoted = _quoted(text)
    if quoted:
        return quoted
    for pattern in _PRODUCT_AFTER:
        for match in pattern.finditer(text):
            query = _ARTICLES.sub("", _ORDINAL.sub("", _PRODUCT_END.sub("", match["q"]))).strip(" .!?\"'")
            if query and not _NOT_A_PRODUCT.search(query):
                return normalize_query(query)
    return None


def _shop(text: str) -> Parsed | str | None:
    sites = _SHOPS.keys(text)
    if not sites:
        unknown = [d for d in _DOMAIN.findall(text) if d not in SHOP_BY_DOMAIN]
        if unknown:
            return f"SimDroid has no site {unknown[0]!r} (its shops: {_listing(_SHOP_KEYS)})"
        return None
    if len(sites) > 1:
        return f"it names {len(sites)} shops ({_listing(sites)}); a SimDroid task visits one"
    site = sites[0]
    rest = " ".join(_SHOPS.sub(" ", text).split())
    query = _product(rest)
    if _CART.search(rest):
        if query is None:
            return f"it asks for something in the cart at {site} but names no product (e.g. 'usb-c cable')"
        return Parsed("shop_add_to_cart", {"site": site, "query": query})
    if query is not None:
        return Parsed("shop_search", {"site": site, "query": query})
    return Parsed("shop_open_site", {"site": site})


# -- alarms ----------------------------------------------------------------------------------------

_ALARM = re.compile(
    r"\b(?:alarm|alarms|wake[\s-]?(?:me|up)|wakeup|get\s+me\s+up)\b"
    r"|\b(?:get|getting|be)\s+up\s+(?:at|by|around|before)\b"  # "I need to get up at 6 in the morning"
)


def _alarm(text: str) -> Parsed | str | None:
    if not _ALARM.search(text):
        return None
    time = clock_time(text)
    if time is None:
        return "it asks for an alarm but gives no time of day I can read (e.g. 7:15 AM, 19:05, half past 7)"
    return Parsed("set_alarm", {"hour": time[0], "minute": time[1]})


# -- web search ------------------------------------------------------------------------------------

_APP_AFTER_GOOGLE = r"(?!\s*(?:maps|drive|translate|play|photos|calendar|chrome|fit|news|podcasts)\b)"
_SEARCHES = (  # the first that matches gives the query: "Run an internet search: best pizza in rome"
    re.compile(r"\b(?:search|google|look\s+up)(?:\s+(?:the\s+)?(?:web|internet|online))?\s*:\s*(?P<q>.+)"),
    re.compile(r"\bsearch\s+(?:the\s+)?(?:web|internet|net|online|google|chrome)\s+(?:for|about|on)\s+(?P<q>.+)"),
    re.compile(r"\bsearch(?:\s+up)?\s+(?:(?:on|in|with|using)\s+(?:google|chrome)\s+)?(?:for|about|on)\s+(?P<q>.+)"),
    re.compile(r"\bfind\s+(?:me\s+|out\s+)?(?:some\s+)?(?:web\s+|internet\s+|online\s+)?(?:results|info|information|pages|articles|stuff)\s+(?:about|on|for|regarding)\s+(?P<q>.+)"),
    re.compile(r"\bwhat\s+(?:does|do)\s+the\s+(?:web|internet)\s+(?:say|have)\s+(?:about|on)\s+(?P<q>.+)"),
    re.compile(rf"\b(?:search(?:\s+up|\s+(?:the\s+)?(?:web|internet|online|google))?|look(?:ing)?\s+up|google|bing){_APP_AFTER_GOOGLE}\s+(?P<q>.+)"),
    re.compile(r"\blook\s+(?P<q>.+?)\s+up\b"),
)  # fmt: skip
_SEARCH_CUE = re.compile(r"\b(?:search|google|bing|look(?:ing)?\s+up|web|internet|online|results)\b")


def _search(text: str) -> Parsed | str | None:
    quoted = _quoted(text)
    if quoted and _SEARCH_CUE.search(text):
        return Parsed("web_search", {"query": quoted})
    for pattern in _SEARCHES:
        match = pattern.search(text)
        if match is not None:
            query = _clean_query(match["q"])
            if query:
                return Parsed("web_search", {"query": query})
    if re.search(r"\b(?:search|google)\b", text):
        return "it asks for a search but not for what (put the query after 'search for' or in quotes)"
    return None


# -- settings and brightness -----------------------------------------------------------------------

_SETTING_KEYS = list(SETTING_WORDS)
_OFF = re.compile(r"\b(?:off|disable|disabled|deactivate|deactivated|kill)\b")
# "of" typed for "off", only where the switch's state goes: "turn bluetooth of", "switch of wifi"
# ("the state of wifi", "turn off the location of my phone" are no state).
_OF_AS_OFF = re.compile(
    r"@\s+of\s*(?:[.!?,]|$|(?:now|please|again|for\s+me|right\s+now|thanks)\b)"
    r"|\b(?:turn|switch|flip)\s+(?:@\s+)?of(?:\s+(?:the\s+|my\s+)?@|\s*[.!?]*$)"
)
_ON_VERB = re.compile(r"\b(?:enable|enabled|activate|activated)\b")
# A bare "on" is a state only beside a verb or the switch, or at the end ("Show my location on the
# map" asks for no switch).
_ON = re.compile(
    r"\b(?:turn|switch|flip|put|set|toggle|get|keep|leave|is|be|are|stays|to)\s+on\b"
    r"|\bon\s+(?:@|(?:now|please|again|right\s+now|for\s+me|then|and)\b)|\bon\s*[.!?]*$"
    r"|\b(?:in|into|to|use|using|enter)\s+(?:the\s+)?@"  # "put the phone in flight mode", "switch to dark mode"
)


def _toggle(text: str) -> Parsed | str | None:
    settings = _SETTINGS.keys(text)
    if not settings:
        if re.search(r"\b(?:turn|switch)\s+(?:on|off)\b|\b(?:enable|disable)\b", text):
            names = _listing([TOGGLE_NAMES[k] for k in _SETTING_KEYS])
            return f"it switches something SimDroid has no switch for (its switches: {names})"
        return None
    rest = _SETTINGS.sub("@", text)  # "do not disturb" holds no "not"; "@" marks where the switch was
    off = bool(_OFF.search(rest) or _OF_AS_OFF.search(rest))
    on = bool(_ON_VERB.search(rest) or _ON.search(rest))
    if len(settings) > 1 and (on or off):
        named = _listing([TOGGLE_NAMES[k] for k in settings])
        return f"it names {len(settings)} settings ({named}); a SimDroid task switches one"
    if on == off:
        how = "both on and off" if on else "neither on nor off"
        return f"it names {TOGGLE_NAMES[settings[0]]} but says {how}"
    return Parsed("toggle_setting", {"setting": settings[0], "on": on})


_BRIGHTNESS = re.compile(r"\b(?:brightness|bright|brighter|dim|dimmer|backlight)\b")


def _brightness(text: str) -> Parsed | str | None:
    if not _BRIGHTNESS.search(text):
        return None
    level = percent(text)
    if level is None:
        return "it asks about brightness but names no level (e.g. 40%)"
    if level > 100:
        return f"brightness {level}% is no level: give 0-100%"
    return Parsed("set_brightness", {"percent": level})


# -- apps ------------------------------------------------------------------------------------------

_APP_NAMES = [app.name for app in APPS]
_OPEN = re.compile(
    r"\b(?:open|opening|launch|start|run|play|watch|listen\s+to|put\s+on|bring\s+up|pull\s+up|fire\s+up|boot\s+up|show|display|go\s+to"
    r"|goto|switch\s+to|head\s+to|navigate\s+to|take\s+me\s+to|get\s+me\s+to|load|use|access|check|view"
    r"|see|look\s+at|read|get|i\s+want|i'd\s+like|i\s+would\s+like|i\s+need|let\s+me|where\s+is|find)\b"
)
_FILLER = re.compile(r"\b(?:the|my|a|an|app|application|please|now|thanks|quickly|for|me|up|again)\b|[^\w\s]")


def _open_app(text: str) -> Parsed | str | None:
    text = _ON_PHONE.sub(" ", text)
    apps = _APPS.keys(text)
    cue = _OPEN.search(text)
    if len(apps) > 1:
        return f"it names {len(apps)} apps ({_listing(apps)}); a SimDroid task opens one"
    if apps and (cue or not _FILLER.sub(" ", _APPS.sub(" ", text)).strip()):
        return Parsed("open_app", {"app": apps[0]})
    if apps:
        return f"it names {apps[0]} but not what to do with it (e.g. 'open {apps[0]}')"
    if cue:
        name = " ".join(_FILLER.sub(" ", text[cue.end() :]).split())
        wanted = f"{name!r} is no app SimDroid has" if name else "it names no app to open"
        return f"{wanted} (its apps: {_listing(_APP_NAMES)})"
    return None


# -- the whole ---------------------------------------------------------------------------------------

# The order settles overlaps: a shop's site before its search, an alarm before "set", a search
# before the switch or app it mentions, a switch before the Settings app.
_READERS: tuple[Callable[[str], Parsed | str | None], ...] = (
    _shop, _alarm, _search, _toggle, _brightness, _open_app,
)  # fmt: skip
_NOTHING = (
    "I recognise no SimDroid task in it: no app to open, setting to switch on or off, alarm time, "
    "search query, brightness level or shop site"
)


# The words the readers act on, for putting typing slips right ("opne the clokc", "googel tacos").
_VOCABULARY = frozenset(
    word
    for phrase in (
        *(p for key, words in APP_WORDS.items() for p in (key, *words)),
        *(p for key, words in SETTING_WORDS.items() for p in (TOGGLE_NAMES[key], *words)),
        *re.findall(r"[a-z]+", _OPEN.pattern + _OFF.pattern + _ON_VERB.pattern + _ON.pattern),
        *re.findall(r"[a-z]+", _ALARM.pattern + _SEARCH_CUE.pattern + _BRIGHTNESS.pattern + _CART.pattern),
        "search", "google", "turn", "switch", "toggle", "set", "buy", "purchase", "order", "find", "browse",
    )
    for word in re.findall(r"[a-z]+", phrase.lower())
)  # fmt: skip


def _read(low: str) -> Parsed | NotParsed:
    first_reason: str | None = None
    for read in _READERS:
        found = read(low)
        if isinstance(found, Parsed):
            return found
        first_reason = first_reason or found
    return NotParsed(first_reason or _NOTHING)


def parse_instruction(text: str) -> Parsed | NotParsed:
    """The SimDroid task kind and parameters ``text`` asks for, or why it cannot be read as one.
    Text read as no task is read again with typing slips in the parser's own words put right
    (``free_spelling``); the first reading's reason stands where that reads nothing either."""
    low = _normalise(text)
    if not low:
        return NotParsed("the instruction is empty")
    found = _read(low)
    if isinstance(found, NotParsed):
        fixed = spelled(low, _VOCABULARY)
        again = _read(fixed) if fixed != low else found
        return again if isinstance(again, Parsed) else found
    return found
