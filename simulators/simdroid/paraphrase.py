"""Varied phrasings of a SimDroid task, for training only (instruction augmentation).

The train split has four or five phrasing templates per task kind, which a small policy fits
word for word; people phrase the same requests in many more ways. ``paraphrase`` composes one
phrasing from a task's kind and parameters: a request frame ("could you …", "… for me", "I'd like
you to …"), a verb per kind (open/launch/pull up…, turn on/enable/switch off…, set/add/schedule an
alarm, wake me…, search/look up/google…, set/put/dim/raise the brightness…), word orders, quoted or
bare queries and several clock-time and percentage forms. Every phrasing it returns is read back by
SimDroid's free-text parser (``free_text.parse_instruction``) as the task's own kind and parameters,
so the success rules judge the paraphrased task exactly as the original; a draw that does not read
back, or that is one of the train templates' own texts, is drawn again.

Pure and deterministic given the ``random.Random`` it is handed. Only training paths call it
(``WarmStartConfig.paraphrase``, ``CollectorParams.paraphrase``, ``LoopConfig.paraphrase``);
evaluation tasks keep their instructions.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from distrl_core.envs.number_words import spelled
from distrl_core.envs.protocol import Task
from simulators.simdroid.catalog import SHOP_BY_DOMAIN, normalize_query
from simulators.simdroid.free_task import KINDS
from simulators.simdroid.free_text import APP_WORDS, SETTING_WORDS, Parsed, parse_instruction
from simulators.simdroid.task_text import (
    ALARM_TEMPLATES,
    APP_TEMPLATES,
    BRIGHTNESS_TEMPLATES,
    SEARCH_TEMPLATES,
    SHOP_TEMPLATES,
    TOGGLE_NAMES,
    TOGGLE_TEMPLATES,
)
from simulators.simdroid.tasks import _template_fields

__all__ = [
    "ATTEMPTS", "paraphrase", "paraphrase_task", "paraphrase_tasks", "reads_back", "validate_probability",
]  # fmt: skip

ATTEMPTS = 24  # draws tried before giving up on a task (it then keeps its instruction)

# Request frames around an imperative core ("open Chrome").
_FRAMES = (
    "{c}", "{c}", "{c}", "please {c}", "{c} please", "{c}, please", "could you {c}?", "can you {c}?",
    "can you please {c}?", "would you {c}?", "could you please {c} for me?", "I'd like you to {c}",
    "I want you to {c}", "I need you to {c}", "{c} for me", "please {c} for me", "{c} now",
    "{c} right now", "hey, {c}", "quickly {c}", "{c}, thanks", "go ahead and {c}",
    "{c} please, thank you", "ok, {c}", "I'd like to {c}", "I want to {c}", "let's {c}",
)  # fmt: skip
_FIRST_PERSON = frozenset({"I'd like to {c}", "I want to {c}", "let's {c}"})
# Frames for a core that is no verb phrase ("alarm at 7 am", "brightness 40%").
_BARE_FRAMES = ("{c}", "{c}", "{c} please", "{c}, please", "{c} for me", "{c} now", "{c}, thanks", "ok, {c}")
_BARE_STARTS = ("alarm ", "new alarm", "brightness ", "I need an", "I want the")

_APP_VERBS = (
    "open", "open up", "launch", "start", "start up", "run", "show", "show me", "bring up", "pull up",
    "fire up", "boot up", "go to", "switch to", "head to", "take me to", "load", "get me to",
)  # fmt: skip
_APP_OBJECTS = ("{a}", "{a}", "the {a} app", "{a} app", "my {a} app", "the {a} application", "my {a}")
# An app called by what it holds ("my inbox", "the dialer"): the parser's own words for it, less the
# ones that are no object of "open" ("take a selfie"). A third of app phrasings use one, so the policy
# learns that "inbox" is the Gmail icon, not only the name itself.
_APP_ALIAS_SHARE = 1 / 3
_APP_ALIASES: dict[str, tuple[str, ...]] = {
    app: tuple(w for w in words if not w.startswith(("take ", "my "))) for app, words in APP_WORDS.items()
}
_ALIAS_OBJECTS = ("{a}", "the {a}", "my {a}")

_SETTING_SYNONYMS: dict[str, tuple[str, ...]] = {
    "wifi": ("wifi", "WiFi", "the Wi-Fi"), "airplane": ("flight mode", "airplane mode"),
    "mobile_data": ("cellular data", "my mobile data"), "bluetooth": ("the Bluetooth", "bluetooth"),
    "nfc": ("nfc",), "dark_theme": ("dark mode", "night mode"), "auto_rotate": ("screen rotation", "auto rotate"),
    "dnd": ("do not disturb", "DND"), "location": ("GPS", "location services"),
    "battery_saver": ("power saving mode", "the battery saver"),
}  # fmt: skip
_TOGGLE_ON = (
    "turn on {n}", "turn {n} on", "switch on {n}", "switch {n} on", "enable {n}", "activate {n}",
    "put {n} on", "set {n} to on", "flip {n} on", "toggle {n} on", "get {n} on", "turn {n} back on",
    "enable {n} on my phone", "keep {n} on",
)  # fmt: skip
_TOGGLE_OFF = (
    "turn off {n}", "turn {n} off", "switch off {n}", "switch {n} off", "disable {n}", "deactivate {n}",
    "kill {n}", "set {n} to off", "shut off {n}", "flip {n} off", "toggle {n} off", "get {n} off",
    "disable {n} on my phone", "turn {n} off for now",
)  # fmt: skip

_ALARM_CORES = (
    "set an alarm for {t}", "set an alarm at {t}", "create an alarm for {t}", "add an alarm at {t}",
    "schedule an alarm for {t}", "make an alarm for {t}", "set my alarm for {t}", "put an alarm at {t}",
    "wake me up at {t}", "wake me at {t}", "set a wake-up alarm for {t}", "I need an alarm at {t}",
    "new alarm for {t}", "alarm at {t}", "get me up at {t}", "set the alarm to {t}",
    "add a new alarm for {t}", "program an alarm for {t}",
)  # fmt: skip

_SEARCH_CORES = (
    "search for {q}", "search the web for {q}", "search online for {q}", "search Google for {q}",
    "google {q}", "look up {q}", "look up {q} online", "look up {q} on the internet", "search {q}",
    "do a search for {q}", "run a web search for {q}", "find information about {q}", "find info on {q}",
    "use Chrome to look up {q}", "search the internet for {q}", "look {q} up", "search: {q}",
    "what does the internet say about {q}", "find me results for {q}", "google search {q}",
)  # fmt: skip

_BRIGHTNESS_CORES = (
    "set the brightness to {p}", "set brightness at {p}", "put the brightness at {p}",
    "change the brightness to {p}", "brightness to {p}", "make the brightness {p}",
    "turn the brightness to {p}", "set the screen brightness to {p}", "put screen brightness on {p}",
    "adjust brightness to {p}", "I want the brightness at {p}", "bring the brightness to {p}",
    "brightness {p}",
)  # fmt: skip
_BRIGHTNESS_DOWN = ("dim the screen to {p}", "lower the brightness to {p}", "turn the brightness down to {p}")
_BRIGHTNESS_UP = (
    "raise the brightness to {p}",
    "turn the brightness up to {p}",
    "increase the brightness to {p}",
)

_SHOP_OPEN = (
    "go to {s}", "open {s}", "visit {s}", "navigate to {s}", "take me to {s}", "pull up {s}", "load {s}",
    "head over to {s}", "open the {s} website", "bring up the {s} site", "browse to {s}",
)  # fmt: skip
_SHOP_SEARCH = (
    "search {s} for {q}", "on {s}, search for {q}", "go to {s} and look for {q}", "open {s} and find {q}",
    "look up {q} on {s}", "find {q} on {s}", "browse {s} for {q}", "visit {s} and search for {q}",
    "on {s} look up {q}", "search for {q} on {s}",
)  # fmt: skip
_SHOP_CART = (
    "buy {q} on {s}", "on {s}, find {q} and add the first one to the cart",
    "search {s} for {q} and put the first result in my cart", "add {q} to my cart on {s}",
    "go to {s}, look up {q} and add the top result to the basket", "order {q} from {s}",
    "put {q} in the cart on {s}", "on {s}, search for {q} then add the first item to my cart",
    "open {s}, find {q}, add the first hit to the cart",
)  # fmt: skip


def _time(hour: int, minute: int, rng: random.Random) -> str:
    """One way of saying hour:minute that names it unambiguously."""
    h12 = hour % 12 or 12
    am_pm = rng.choice(("AM", "am", "a.m.", "in the morning") if hour < 12 else ("PM", "pm", "p.m."))
    if hour >= 12 and rng.random() < 0.3:
        am_pm = "in the afternoon" if hour < 17 else "in the evening" if hour < 21 else "at night"
    forms: list[Callable[[], str]] = [
        lambda: f"{h12}:{minute:02d} {am_pm}",
        lambda: f"{h12}:{minute:02d}{am_pm.replace(' ', '')}" if am_pm in ("AM", "am", "PM", "pm") else "",
        lambda: f"{h12}.{minute:02d} {am_pm}",
        lambda: f"{hour:02d}:{minute:02d}",
        lambda: f"{hour}:{minute:02d}",
        lambda: f"{hour}h{minute:02d}" if hour >= 13 else "",
        lambda: f"{spelled(h12)} {spelled(minute) if minute >= 10 else 'oh ' + spelled(minute)} {am_pm}"
        if minute else f"{spelled(h12)} o'clock {am_pm}",
        lambda: f"{h12} {am_pm}" if minute == 0 else "",
        lambda: {0: "midnight", 12: "noon"}.get(hour, "") if minute == 0 else "",
        lambda: f"quarter past {rng.choice((str(h12), spelled(h12)))} {am_pm}" if minute == 15 else "",
        lambda: f"half past {rng.choice((str(h12), spelled(h12)))} {am_pm}" if minute == 30 else "",
        lambda: f"{minute} past {h12} {am_pm}" if 0 < minute <= 20 and minute != 15 else "",
        lambda: f"quarter to {(hour + 1) % 12 or 12} {'am' if (hour + 1) % 24 < 12 else 'pm'}"
        if minute == 45 else "",
    ]  # fmt: skip
    for _ in range(8):
        said = rng.choice(forms)()
        if said:
            return said
    return f"{h12}:{minute:02d} {am_pm}"


def _percent(p: int, rng: random.Random) -> str:
    forms = [f"{p}%", f"{p} %", f"{p} percent", f"{p} per cent", f"{spelled(p)} percent", f"{p}"]
    forms += ["half"] * (p == 50) + ["full", "max", "maximum"] * (p == 100)
    return rng.choice(forms)


def _query(q: str, rng: random.Random) -> str:
    return rng.choice((q, q, f'"{q}"', f"'{q}'", f"“{q}”"))


def _core(kind: str, params: Mapping[str, Any], rng: random.Random) -> str:
    """An imperative phrase asking for the task (no frame)."""
    if kind == "open_app":
        app = str(params["app"])
        aliases = _APP_ALIASES.get(app, ())
        if aliases and rng.random() < _APP_ALIAS_SHARE:
            return f"{rng.choice(_APP_VERBS)} {rng.choice(_ALIAS_OBJECTS).format(a=rng.choice(aliases))}"
        return f"{rng.choice(_APP_VERBS)} {rng.choice(_APP_OBJECTS).format(a=app)}"
    if kind == "toggle_setting":
        setting = str(params["setting"])
        name = TOGGLE_NAMES[setting]
        words = SETTING_WORDS[setting]
        names = (name, name, f"the {name}", *_SETTING_SYNONYMS[setting], *words, *(f"the {w}" for w in words))
        return rng.choice(_TOGGLE_ON if params["on"] else _TOGGLE_OFF).format(n=rng.choice(names))
    if kind == "set_alarm":
        return rng.choice(_ALARM_CORES).format(t=_time(int(params["hour"]), int(params["minute"]), rng))
    if kind == "web_search":
        return rng.choice(_SEARCH_CORES).format(q=_query(str(params["query"]), rng))
    if kind == "set_brightness":
        p = int(params["percent"])
        verbs = _BRIGHTNESS_CORES + (_BRIGHTNESS_DOWN if p < 50 else _BRIGHTNESS_UP)
        return rng.choice(verbs).format(p=_percent(p, rng))
    site = str(params["site"])
    shop = SHOP_BY_DOMAIN[site]
    s = rng.choice((site, site, shop.title, site.removesuffix(".com")))
    q = _query(str(params.get("query", "")), rng)
    cores = {"shop_open_site": _SHOP_OPEN, "shop_search": _SHOP_SEARCH, "shop_add_to_cart": _SHOP_CART}[kind]
    return rng.choice(cores).format(s=s, q=q)


def _finish(text: str, rng: random.Random) -> str:
    """Capitals and end punctuation as people type them."""
    text = " ".join(text.split())
    if rng.random() < 0.2:
        return text.lower()
    text = text[:1].upper() + text[1:]
    if not text.endswith(("?", ".", "!")) and rng.random() < 0.25:
        text += rng.choice((".", "!", "."))
    return text


def _named(kind: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters a person names for ``kind`` (free_task.KINDS), as the parser reports them."""
    named = {name: params[name] for name in KINDS[kind]}
    if "query" in named:
        named["query"] = normalize_query(str(named["query"]))
    return named


def reads_back(text: str, kind: str, params: Mapping[str, Any]) -> bool:
    """Whether the free-text parser reads ``text`` as ``kind`` with ``params``' named parameters."""
    parsed = parse_instruction(text)
    return isinstance(parsed, Parsed) and parsed.kind == kind and parsed.params == _named(kind, params)


_TRAIN_TEMPLATES: dict[str, list[tuple[str, str]]] = {
    "open_app": APP_TEMPLATES["train"], "toggle_setting": TOGGLE_TEMPLATES["train"],
    "set_alarm": ALARM_TEMPLATES["train"], "web_search": SEARCH_TEMPLATES["train"],
    "set_brightness": BRIGHTNESS_TEMPLATES["train"], "shop_open_site": SHOP_TEMPLATES["train"][1],
    "shop_search": SHOP_TEMPLATES["train"][2], "shop_add_to_cart": SHOP_TEMPLATES["train"][3],
}  # fmt: skip


def _template_texts(task: Task) -> set[str]:
    """The task's instruction in each train template of its kind, casefolded."""
    fields = _template_fields(task)
    return {template.format(**fields).casefold() for _, template in _TRAIN_TEMPLATES[task.kind]}


def paraphrase(task: Task, rng: random.Random) -> str | None:
    """A phrasing of ``task`` that the parser reads back as its kind and parameters and that is none
    of the train templates' texts for it; None if ``ATTEMPTS`` draws found none (or the kind has no
    paraphrases)."""
    if task.kind not in KINDS:
        return None
    templates = _template_texts(task)
    for _ in range(ATTEMPTS):
        core = _core(task.kind, task.params, rng)
        frame = rng.choice(_BARE_FRAMES if core.startswith(_BARE_STARTS) else _FRAMES)
        if " me " in f" {core} " and (frame in _FIRST_PERSON or " me" in frame):  # no "show me … for me"
            frame = "{c}"
        text = _finish(frame.format(c=core), rng)
        if text.casefold().rstrip(".!") not in templates and reads_back(text, task.kind, task.params):
            return text
    return None


def paraphrase_task(task: Task, rng: random.Random) -> Task:
    """``task`` with a paraphrased instruction (``paraphrase``), the same id, split and params; the
    task itself when no paraphrase reads back."""
    text = paraphrase(task, rng)
    return task if text is None else dataclasses.replace(task, instruction=text)


def paraphrase_tasks(tasks: Sequence[Task], probability: float, rng: random.Random) -> list[Task]:
    """Each task, with probability ``probability`` paraphrased (``paraphrase_task``): what a training
    path does to the episodes it is about to run. 0 returns the tasks and draws nothing."""
    if not 0.0 <= probability <= 1.0:
        raise ValueError(f"paraphrase is a probability (0-1), got {probability}")
    if probability == 0.0:
        return list(tasks)
    return [paraphrase_task(t, rng) if rng.random() < probability else t for t in tasks]


def validate_probability(owner: str, probability: float) -> None:
    """Raise a clear error when ``owner``'s ``paraphrase`` setting is no probability."""
    if not 0.0 <= probability <= 1.0:
        raise ValueError(
            f"{owner}.paraphrase is the probability (0-1) that a train episode's instruction is "
            f"replaced by a paraphrase, got {probability}"
        )
