"""SimDroid task families, mirroring Android-in-the-Wild General and Web Shopping.

Every task has a train or test split. The test split holds out both parameters (apps, settings
combinations, times, queries, sites) and phrasings (whole instruction templates), so a held-out
success rate measures generalisation rather than memorised instructions. Generation is
deterministic (a fixed-seed RNG, no randomness at import).

Choices made while tuning never look at test: ``load_tasks`` also takes the selections carved from
train by ``validation_split`` ("fit"/"validation", and "fit_words"/"validation_words" whose
validation phrasings hold words no fit task has) and ``unseen_split`` ("fit_unseen"/
"validation_unseen": unseen phrasings and unseen parameters, as test); a task's own ``split``
stays "train".
"""

from __future__ import annotations

import random
import re
import zlib
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import Any

from distrl_core.envs.protocol import FAMILIES, SPLITS, Task
from distrl_core.policy.config import Vocabulary
from simulators.simdroid.catalog import (
    APPS,
    BRIGHTNESS_MAX,
    SHOPS,
    TOGGLES,
    first_product,
)
from simulators.simdroid.task_text import (
    ALARM_TEMPLATES,
    APP_TEMPLATES,
    BRIGHTNESS_TEMPLATES,
    PRODUCT_QUERIES,
    SEARCH_QUERIES,
    SEARCH_TEMPLATES,
    SHOP_TEMPLATES,
    TOGGLE_NAMES,
    TOGGLE_TEMPLATES,
    format_12h,
)

# Task sets carved from train by `validation_split` (the "_words" pair with words=True) and
# `unseen_split` (the "_unseen" pair).
SELECTIONS = ("fit", "validation", "fit_words", "validation_words", "fit_unseen", "validation_unseen")
SPLIT_CHOICES = (*SPLITS, *SELECTIONS)  # what `load_tasks(split=...)` accepts
# A held-out set -> the set trained on beside it (what it is "in distribution" against).
TRAINED_BESIDE: dict[str, Vocabulary] = {
    "test": "train",
    "validation": "fit",
    "validation_words": "fit_words",
    "validation_unseen": "fit_unseen",
}
HORIZONS = {"general": 10, "webshop": 20}  # DigiRL's horizons for AitW General / Web Shopping


def _sample(rng: random.Random, items: list[Any], count: int) -> list[Any]:
    return items if len(items) <= count else rng.sample(items, count)


def _held_out(items: Iterable[Any], every: int, offset: int = 0) -> tuple[list[Any], list[Any]]:
    """Deterministic split: every ``every``-th item (from ``offset``) goes to test."""
    train: list[Any] = []
    test: list[Any] = []
    for i, item in enumerate(items):
        (test if i % every == offset else train).append(item)
    return train, test


# ------------------------------------------------------------------------------------------------
# General


def _general_specs(split: str, rng: random.Random) -> list[tuple[str, str, dict[str, Any]]]:
    """(kind, instruction, params) for one split of the General family."""
    specs: list[tuple[str, str, dict[str, Any]]] = []
    pick = 0 if split == "train" else 1

    apps = _held_out(APPS, every=4, offset=1)[pick]
    combos = [(app, t) for app in apps for t in APP_TEMPLATES[split]]
    for app, (tid, template) in _sample(rng, combos, 30 if split == "train" else 14):
        specs.append(
            (
                "open_app",
                template.format(app=app.name),
                {"app": app.name, "package": app.package, "template": tid},
            )
        )

    toggle_combos = _held_out([(t, on) for t in TOGGLES for on in (True, False)], every=4, offset=2)[pick]
    combos = [(tc, t) for tc in toggle_combos for t in TOGGLE_TEMPLATES[split]]
    for (toggle, on), (tid, template) in _sample(rng, combos, 30 if split == "train" else 14):
        text = template.format(name=TOGGLE_NAMES[toggle.key], on_off="on" if on else "off",
                               Enable="Enable" if on else "Disable")  # fmt: skip
        setup = {
            "settings": [[toggle.namespace, toggle.setting, toggle.off_value if on else toggle.on_value]]
        }
        specs.append(
            ("toggle_setting", text, {"setting": toggle.key, "on": on, "template": tid, "setup": setup})
        )

    times = [(h, m) for h in range(24) for m in (0, 5, 10, 15, 20, 30, 40, 45, 50)]
    times = _held_out(times, every=5, offset=3)[pick]
    combos = [(hm, t) for hm in times for t in ALARM_TEMPLATES[split]]
    for i, ((hour, minute), (tid, template)) in enumerate(
        _sample(rng, combos, 30 if split == "train" else 14)
    ):
        text = template.format(h12=format_12h(hour, minute), h24=f"{hour:02d}:{minute:02d}")
        existing = [{"hour": (hour + 3 + i % 20) % 24, "minute": 0, "enabled": True}]  # never the target
        if i % 4 == 0:  # an existing but disabled alarm at the right time: switching it on also counts
            existing.append({"hour": hour, "minute": minute, "enabled": False})
        specs.append(
            (
                "set_alarm",
                text,
                {"hour": hour, "minute": minute, "template": tid, "setup": {"alarms": existing}},
            )
        )

    queries = _held_out(SEARCH_QUERIES, every=4, offset=0)[pick]
    combos = [(q, t) for q in queries for t in SEARCH_TEMPLATES[split]]
    for query, (tid, template) in _sample(rng, combos, 30 if split == "train" else 14):
        specs.append(("web_search", template.format(q=query), {"query": query, "template": tid}))

    percents = [p for p in range(10, 101, 10)] if split == "train" else [p for p in range(5, 100, 10)]
    combos = [(p, t) for p in percents for t in BRIGHTNESS_TEMPLATES[split]]
    for percent, (tid, template) in _sample(rng, combos, 20 if split == "train" else 10):
        start = round(BRIGHTNESS_MAX * (0.2 if percent >= 50 else 0.85))
        setup = {"settings": [["system", "screen_brightness", str(start)]]}
        specs.append(
            (
                "set_brightness",
                template.format(p=percent),
                {"percent": percent, "template": tid, "setup": setup},
            )
        )
    return specs


# ------------------------------------------------------------------------------------------------
# Web shopping


def _webshop_specs(split: str, rng: random.Random) -> list[tuple[str, str, dict[str, Any]]]:
    specs: list[tuple[str, str, dict[str, Any]]] = []
    train_sites, test_sites = list(SHOPS[:4]), list(SHOPS[4:])
    queries = _held_out(PRODUCT_QUERIES, every=4, offset=1)[0 if split == "train" else 1]
    level_sites = {1: train_sites if split == "train" else test_sites, 2: list(SHOPS), 3: list(SHOPS)}
    if split == "train":
        level_sites[2] = level_sites[3] = train_sites
    counts = {1: 16, 2: 50, 3: 60} if split == "train" else {1: 6, 2: 20, 3: 24}
    kinds = {1: "shop_open_site", 2: "shop_search", 3: "shop_add_to_cart"}
    for level in (1, 2, 3):
        templates = SHOP_TEMPLATES[split][level]
        if level == 1:
            combos = [(site, None, t) for site in level_sites[1] for t in templates]
        else:
            combos = [(site, q, t) for site in level_sites[level] for q in queries for t in templates]
        for site, query, (tid, template) in _sample(rng, combos, counts[level]):
            params: dict[str, Any] = {"site": site.domain, "level": level, "template": tid}
            if query is not None:
                params["query"] = query
            if level == 3:
                product = first_product(site.domain, query)
                params["product_id"] = product.product_id
                params["product_name"] = product.name
            specs.append((kinds[level], template.format(site=site.domain, q=query), params))
    return specs


@cache
def _all_tasks() -> tuple[Task, ...]:
    tasks = []
    for family, make in (("general", _general_specs), ("webshop", _webshop_specs)):
        for split in SPLITS:
            rng = random.Random(f"simdroid-tasks/{family}/{split}/v1")
            for i, (kind, instruction, params) in enumerate(make(split, rng)):
                tasks.append(
                    Task(
                        task_id=f"{family}-{split}-{i:04d}",
                        family=family,
                        kind=kind,
                        instruction=instruction,
                        split=split,
                        horizon=HORIZONS[family],
                        params=params,
                    )
                )
    return tuple(tasks)


@cache
def _index() -> dict[str, Task]:
    return {task.task_id: task for task in (*_all_tasks(), *unseen_split()[1])}


def load_tasks(family: str | None = None, split: str | None = None) -> list[Task]:
    """All tasks, optionally of one family ("general"/"webshop") and one split ("train"/"test") or
    selection carved from train (``SELECTIONS``: "fit"/"validation" are ``validation_split()``,
    "fit_words"/"validation_words" are ``validation_split(words=True)``)."""
    if family is not None and family not in FAMILIES:
        raise ValueError(f"unknown task family {family!r}; expected one of {FAMILIES}")
    if split is not None and split not in SPLIT_CHOICES:
        raise ValueError(
            f"unknown split {split!r}; expected one of {SPLIT_CHOICES} (all but the first two are "
            "carved from train by validation_split or unseen_split)"
        )
    if split in SELECTIONS:
        return list(_selection(family, split))
    return [
        t
        for t in _all_tasks()
        if (family is None or t.family == family) and (split is None or t.split == split)
    ]


@cache
def _selection(family: str | None, name: str) -> tuple[Task, ...]:
    """A selection of ``SELECTIONS``, computed once (collectors load their pool every batch)."""
    if name.endswith("_unseen"):
        fit, validation = unseen_split(family)
    else:
        fit, validation = validation_split(family, words=name.endswith("_words"))
    return tuple(fit if name.startswith("fit") else validation)


def validation_split(family: str | None = None, *, words: bool = False) -> tuple[list[Task], list[Task]]:
    """(fit, validation), both carved from the train split, for every choice made while tuning.

    The test split holds out phrasings (and parameters); validation mirrors that inside train: the
    first phrasing template of each task kind (``*-train-0``) is held out, so a choice that helps
    on validation helps on unseen phrasings without the test split ever being looked at.

    Those templates reuse the words of other train templates, so a validation phrasing never holds
    a word the fit tasks lack, unlike test phrasings ("Can you get {app} running?"). With
    ``words``, each kind holds out instead the train template with the most words found in no
    other train template (``WORD_HOLDOUT_TEMPLATES``): a choice made there sees unknown words too."""
    held_templates = set(word_holdout_templates()) if words else None
    fit: list[Task] = []
    validation: list[Task] = []
    for task in load_tasks(family, "train"):
        template = str(task.params.get("template", ""))
        if held_templates is not None and template:
            held = template in held_templates
        else:
            held = template.endswith("-0") if template else zlib.crc32(task.task_id.encode()) % 5 == 0
        (validation if held else fit).append(task)
    return fit, validation


# Words too common to count as a phrasing's own (they occur in every family's text).
_COMMON_WORDS = frozenset(
    ["a", "an", "the", "to", "for", "of", "in", "at", "on", "and", "or", "is", "it", "my", "me", "i", "you", "your", "up"]
)  # fmt: skip


def _template_words(template: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", re.sub(r"\{[^}]*\}", " ", template).lower())} - _COMMON_WORDS


def _train_template_groups() -> list[list[tuple[str, str]]]:
    """The train phrasing templates, one list of (id, text) per task kind."""
    return [
        APP_TEMPLATES["train"], TOGGLE_TEMPLATES["train"], ALARM_TEMPLATES["train"],
        SEARCH_TEMPLATES["train"], BRIGHTNESS_TEMPLATES["train"], *SHOP_TEMPLATES["train"].values(),
    ]  # fmt: skip


def train_templates() -> list[tuple[str, str]]:
    return [pair for group in _train_template_groups() for pair in group]


@cache
def word_holdout_templates() -> tuple[str, ...]:
    """Per task kind, the id of the train template with the most words that no other train template
    holds (ties: the lowest id); a kind whose templates share all their words keeps ``*-train-0``."""
    groups = _train_template_groups()
    every = [(tid, _template_words(text)) for group in groups for tid, text in group]
    chosen = []
    for group in groups:
        scored = []
        for i, (tid, text) in enumerate(group):
            others = set().union(*(words for other, words in every if other != tid))
            scored.append((len(_template_words(text) - others), -i, tid))
        best = max(scored)
        chosen.append(best[2] if best[0] > 0 else group[0][0])
    return tuple(chosen)


# What a task asks for, per kind: the parameter the test split holds out for that kind.
PARAMETER_OF: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "open_app": lambda p: p["app"],
    "toggle_setting": lambda p: (p["setting"], p["on"]),
    "set_alarm": lambda p: (p["hour"], p["minute"]),
    "web_search": lambda p: p["query"],
    "set_brightness": lambda p: p["percent"],
    "shop_open_site": lambda p: p["site"],
    "shop_search": lambda p: p["query"],
    "shop_add_to_cart": lambda p: p["query"],
}


def _template_fields(task: Task) -> dict[str, Any]:
    """The fields a phrasing template of ``task``'s kind is formatted with, from its params."""
    p = task.params
    match task.kind:
        case "open_app":
            return {"app": p["app"]}
        case "toggle_setting":
            on = p["on"]
            return {"name": TOGGLE_NAMES[p["setting"]], "on_off": "on" if on else "off",
                    "Enable": "Enable" if on else "Disable"}  # fmt: skip
        case "set_alarm":
            return {"h12": format_12h(p["hour"], p["minute"]), "h24": f"{p['hour']:02d}:{p['minute']:02d}"}
        case "web_search":
            return {"q": p["query"]}
        case "set_brightness":
            return {"p": p["percent"]}
    return {"site": p["site"], "q": p.get("query")}  # the shop kinds


def _template_family(template_id: str) -> str:
    """'alarm-train-3' -> 'alarm': the templates one held-out template stands in for."""
    return template_id.split("-", 1)[0]


def unseen_split(family: str | None = None) -> tuple[list[Task], list[Task]]:
    """(fit, validation) mirroring what test holds out: unseen phrasings *and* unseen parameters.

    ``validation_split(words=True)`` holds out phrasings only, so a validation task's app, query or
    time is also in some fit task; a sentence encoder then finds its fit twin by those words (a
    search phrasing lands next to the same query in another phrasing), which test never offers.
    Here, per task kind, every fourth parameter (sorted) is held out as well as the kind's
    word-holdout template. Fit is the train tasks with neither; validation is each train task with
    a held parameter, rephrased with its kind's held template (id ``<train id>-unseen``, one per
    instruction). Train tasks with just one of the two held belong to neither."""
    templates = {tid: text for tid, text in train_templates()}
    held_template = {_template_family(tid): tid for tid in word_holdout_templates()}
    train = load_tasks(family, "train")
    by_kind: dict[str, set[Any]] = {}
    for task in train:
        by_kind.setdefault(task.kind, set()).add(PARAMETER_OF[task.kind](task.params))
    held_parameters = {
        kind: set(_held_out(sorted(values, key=str), every=4)[1]) for kind, values in by_kind.items()
    }
    fit: list[Task] = []
    validation: dict[str, Task] = {}
    for task in train:
        template = str(task.params["template"])
        held = held_template[_template_family(template)]
        if PARAMETER_OF[task.kind](task.params) not in held_parameters[task.kind]:
            if template != held:
                fit.append(task)
            continue
        instruction = templates[held].format(**_template_fields(task))
        validation.setdefault(instruction, Task(
            task_id=f"{task.task_id}-unseen", family=task.family, kind=task.kind,
            instruction=instruction, split=task.split, horizon=task.horizon,
            params={**task.params, "template": held},
        ))  # fmt: skip
    return fit, list(validation.values())


def get_task(task_id: str) -> Task:
    try:
        return _index()[task_id]
    except KeyError:
        raise KeyError(
            f"no SimDroid task {task_id!r}; ids look like 'general-train-0003' (see load_tasks())"
        ) from None
