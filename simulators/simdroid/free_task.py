"""SimDroid tasks built on the fly from what a typed instruction asks for (``free_text``).

``make_task`` completes the parameters a person names as the generator (``tasks``) does: the app's
package, the shop's level and first product, and a start state that is not already the goal, so the
success rules judge a typed instruction exactly as they judge a generated one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from distrl_core.envs.protocol import Task
from simulators.simdroid.catalog import (
    APP_BY_NAME,
    APPS,
    BRIGHTNESS_MAX,
    SHOP_BY_DOMAIN,
    TOGGLE_BY_KEY,
    first_product,
    normalize_query,
)
from simulators.simdroid.free_text import NotParsed, parse_instruction
from simulators.simdroid.success import UNRECOGNISED_KIND
from simulators.simdroid.tasks import HORIZONS

__all__ = ["FREE_TEMPLATE", "KINDS", "free_task", "instruction_task", "make_task"]

FREE_TEMPLATE = "free-text"  # the "template" of a typed instruction: no generator phrasing
# Per kind, the parameters a person names (``make_task`` derives the rest).
KINDS: dict[str, tuple[str, ...]] = {
    "open_app": ("app",),
    "toggle_setting": ("setting", "on"),
    "set_alarm": ("hour", "minute"),
    "web_search": ("query",),
    "set_brightness": ("percent",),
    "shop_open_site": ("site",),
    "shop_search": ("site", "query"),
    "shop_add_to_cart": ("site", "query"),
}
_SHOP_LEVEL = {"shop_open_site": 1, "shop_search": 2, "shop_add_to_cart": 3}


def _problem(kind: str, p: Mapping[str, Any]) -> str | None:
    """What is wrong with the named parameters ``p`` of ``kind``, if anything."""
    if kind == "open_app" and str(p["app"]).lower() not in APP_BY_NAME:
        return f"SimDroid has no app {p['app']!r}; its apps: {', '.join(a.name for a in APPS)}"
    if kind == "toggle_setting" and (p["setting"] not in TOGGLE_BY_KEY or not isinstance(p["on"], bool)):
        return f"setting must be one of {list(TOGGLE_BY_KEY)} and on true or false, got {dict(p)}"
    if kind == "set_alarm" and not (0 <= p["hour"] <= 23 and 0 <= p["minute"] <= 59):
        return f"hour must be 0-23 and minute 0-59, got {dict(p)}"
    if kind == "set_brightness" and not 0 <= p["percent"] <= 100:
        return f"percent must be 0-100, got {p['percent']}"
    if "query" in p and not normalize_query(str(p["query"])):
        return "the query is empty"
    if kind in _SHOP_LEVEL and p["site"] not in SHOP_BY_DOMAIN:
        return f"SimDroid has no shop {p['site']!r}; its shops: {', '.join(SHOP_BY_DOMAIN)}"
    return None


def _completed(kind: str, p: dict[str, Any]) -> dict[str, Any]:
    """The named parameters ``p`` (checked) with what the generator derives from them."""
    if kind == "open_app":
        app = APP_BY_NAME[str(p["app"]).lower()]
        return {"app": app.name, "package": app.package}
    if "query" in p:
        p["query"] = normalize_query(str(p["query"]))
    if kind in _SHOP_LEVEL:
        p["level"] = _SHOP_LEVEL[kind]
    if kind == "shop_add_to_cart":
        product = first_product(p["site"], p["query"])
        p |= {"product_id": product.product_id, "product_name": product.name}
    return p


def _setup(kind: str, p: Mapping[str, Any]) -> dict[str, Any] | None:
    """A start state that is not already the goal, as the generator sets one up."""
    if kind == "toggle_setting":
        toggle = TOGGLE_BY_KEY[p["setting"]]
        start = toggle.off_value if p["on"] else toggle.on_value
        return {"settings": [[toggle.namespace, toggle.setting, start]]}
    if kind == "set_alarm":  # another alarm already set, three hours later (the generator's first one)
        return {"alarms": [{"hour": (p["hour"] + 3) % 24, "minute": 0, "enabled": True}]}
    if kind == "set_brightness":
        level = round(BRIGHTNESS_MAX * (0.2 if p["percent"] >= 50 else 0.85))
        return {"settings": [["system", "screen_brightness", str(level)]]}
    return None


def make_task(text: str, kind: str, params: Mapping[str, Any]) -> Task:
    """A SimDroid task for ``text`` from what it asks for: ``kind`` and the parameters KINDS[kind]
    names. Its id is ``<family>-free-<digest of kind and text>``, its split "test"."""
    if kind not in KINDS:
        raise ValueError(f"unknown task kind {kind!r}; expected one of {list(KINDS)}")
    missing = [name for name in KINDS[kind] if name not in params]
    if missing:
        raise ValueError(f"{kind} needs the parameters {list(KINDS[kind])}; {missing} missing")
    named = {name: params[name] for name in KINDS[kind]}
    problem = _problem(kind, named)
    if problem is not None:
        raise ValueError(f"{kind}: {problem}")
    family = "webshop" if kind in _SHOP_LEVEL else "general"
    full = {**_completed(kind, named), "template": FREE_TEMPLATE}
    setup = _setup(kind, full)
    if setup is not None:
        full["setup"] = setup
    instruction = " ".join(text.split())
    digest = hashlib.sha1(f"{kind}\x1f{instruction}".encode()).hexdigest()[:10]
    return Task(f"{family}-free-{digest}", family, kind, instruction, "test", HORIZONS[family], full)


def free_task(text: str) -> Task | NotParsed:
    """``text`` read (``free_text.parse_instruction``) and made a task, or why it cannot be."""
    parsed = parse_instruction(text)
    return parsed if isinstance(parsed, NotParsed) else make_task(text, parsed.kind, parsed.params)


def instruction_task(text: str, unrecognised: str | None = None) -> Task:
    """A task that is only its words (kind ``UNRECOGNISED_KIND``): what a device plays when no rule
    reads the text; ``unrecognised`` says why, for the verdict to repeat."""
    digest = hashlib.sha1(" ".join(text.split()).casefold().encode()).hexdigest()[:10]
    params = {"unrecognised": unrecognised} if unrecognised else {}
    return Task(
        f"instruction-{digest}", "general", UNRECOGNISED_KIND, text, "test", HORIZONS["general"], params
    )
