"""The text a SimDroid policy reads, and the vocabulary files the core's default tokenizer is built from.

The core never imports the simulator: the tiny default policy's word-level tokenizer reads the
words of this corpus from ``distrl_core/policy/vocabulary/<split>.txt``, written here
(``python -m simulators.corpus --write``) and checked against a fresh corpus by a test.
"""

from __future__ import annotations

import argparse
from typing import Any

from distrl_core.envs.actions import ActionKind, to_pixels
from distrl_core.policy.candidates import build_candidates
from distrl_core.policy.subword_settings import PATH_SEPARATOR
from distrl_core.policy.tokenizer import split_words
from distrl_core.policy.vocabulary import (
    APP_LABELS_PATH,
    CONTROL_PATHS_PATH,
    CORPUS_SPLITS,
    VALUE_PATHS_PATH,
    VOCABULARY_DIR,
    vocabulary_path,
)
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from simulators.simdroid.catalog import APPS, TOGGLES
from simulators.simdroid.device import SimDroidConfig
from simulators.simdroid.expert import expert_action
from simulators.simdroid.free_task import make_task
from simulators.simdroid.tasks import load_tasks

__all__ = ["CORPUS_SPLITS", "control_paths", "corpus_words", "simdroid_corpus"]


def simdroid_corpus(split: str = "train") -> list[str]:
    """Text a SimDroid policy reads: the split's instructions, every screen the scripted expert sees
    while solving them, and the candidate texts. Deterministic; a couple of seconds. "fit" and
    "fit_words" (and "fit_unseen") are the train split less its validation tasks
    (``validation_split``, the second with ``words=True``; ``unseen_split``): a vocabulary built
    from them leaves validation's own words unknown."""
    if split not in CORPUS_SPLITS:
        raise ValueError(f"simdroid_corpus split must be one of {CORPUS_SPLITS}, got {split!r}")
    tasks = load_tasks(split=split)

    env = SimDroidEnv(SimDroidEnvConfig(device=SimDroidConfig(distractor_prob=0.5), screenshots=False))
    texts: list[str] = []
    for task in tasks:
        observation = env.reset(task, seed=0)
        texts.append(task.instruction)
        for _ in range(task.horizon):
            texts.append(observation.ui_text)
            texts += [c.text for c in build_candidates(task.instruction, observation.ui_text)]
            result = env.step(expert_action(env, task))
            observation = result.observation
            if result.done:
                break
    return texts


def corpus_words(split: str) -> list[str]:
    """The corpus's distinct words, sorted: what a vocabulary file holds."""
    return sorted({w for text in simdroid_corpus(split) for w in split_words(text)})


# One task per control SimDroid's generator can ask for: every switch (turned away from its
# default, so the expert taps it), the brightness slider, an alarm, a web search.
_CONTROL_TASKS: tuple[tuple[str, dict[str, Any]], ...] = (
    *(("toggle_setting", {"setting": t.key, "on": not t.default_on}) for t in TOGGLES),
    ("set_brightness", {"percent": 30}),
    ("set_alarm", {"hour": 7, "minute": 15}),
    ("web_search", {"query": "weather"}),
)


def expert_route(env: SimDroidEnv, kind: str, params: dict[str, Any]) -> tuple[list[str], str | None]:
    """The labels the scripted expert taps from the launcher on for one task, up to its first action
    that is not a tap on a labelled element (a dialog's dismissal and a swipe to the launcher's next
    page are not steps); and the label of
    the control that action gives a value to, if any: the field last tapped when it types into an
    editable one, the element under the point when it taps one at a point (a slider)."""
    task = make_task(f"{kind} {params}", kind, params)
    observation = env.reset(task, seed=0)
    labels: list[str] = []
    tapped = None
    for _ in range(task.horizon):
        dialog = env.device.state.dialog is not None
        action = expert_action(env, task)
        if not dialog and action.kind != ActionKind.SWIPE:  # paging the launcher leads nowhere by itself
            element = observation.elements[action.index] if action.index is not None else None
            if action.kind == ActionKind.TAP and element is not None and element.label:
                labels.append(element.label)
                tapped = element
                observation = env.step(action).observation
                continue
            if action.kind == ActionKind.TYPE and tapped is not None and tapped.editable:
                return labels, tapped.label
            if action.kind == ActionKind.TAP and action.point is not None:
                x, y = to_pixels(action.point, observation.screen_size)
                under = [
                    e
                    for e in observation.elements
                    if e.label and e.bounds[0] <= x < e.bounds[2] and e.bounds[1] <= y < e.bounds[3]
                ]
                # A slider's text is its value ("85%"): it is called by its description.
                return labels, (under[-1].content_desc or under[-1].label) if under else None
            return labels, None
        observation = env.step(action).observation
    return labels, None


def _routes() -> list[tuple[list[str], str | None]]:
    env = SimDroidEnv(SimDroidEnvConfig(device=SimDroidConfig(distractor_prob=0.0), screenshots=False))
    return [expert_route(env, kind, params) for kind, params in _CONTROL_TASKS]


def control_paths() -> list[str]:
    """The routes to SimDroid's controls, as base "tiny-minilm-controls"'s feature reads them
    (``SubwordSettings.semantic_paths``): for one task per control, the labels of the elements the
    scripted expert taps from the launcher on, up to its first action that is not a tap on a
    labelled element (typing, a slider's point, ``status``); a dialog's dismissal is not a step.
    "Settings > Network & internet > Wi-Fi", "Clock > Add alarm", "Settings > Display" (the
    slider is tapped at a point)."""
    paths: list[str] = []
    for labels, _ in _routes():
        path = PATH_SEPARATOR.join(labels)
        if len(labels) > 1 and path not in paths:
            paths.append(path)
    return paths


def route_through(labels: list[str], control: str | None) -> list[str]:
    """An expert route ending at the control its value goes to (which the route's last tap may
    already be: the search field is tapped, then typed into)."""
    return labels if control is None or labels[-1:] == [control] else [*labels, control]


def value_paths() -> list[str]:
    """The routes that end at a control taking a value (``SubwordSettings.semantic_value_paths``,
    base "tiny-minilm-words-values"): the expert's route, through the control its next action types
    into or taps at a point. "Settings > Display > Brightness" (the slider), "Chrome > Search or
    type web address" (the field it tapped, then typed into). An alarm's route is not one: its time
    is typed into the dialog that "Add alarm" opens, not into "Add alarm"."""
    paths: list[str] = []
    for labels, control in _routes():
        if control is None:
            continue
        route = route_through(labels, control)
        path = PATH_SEPARATOR.join(route)
        if len(route) > 1 and path not in paths:
            paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite the files in {VOCABULARY_DIR}")
    args = parser.parse_args(argv)
    files = {vocabulary_path(split): "\n".join(corpus_words(split)) + "\n" for split in CORPUS_SPLITS}
    files[APP_LABELS_PATH] = "\n".join(app.name for app in APPS) + "\n"
    files[CONTROL_PATHS_PATH] = "\n".join(control_paths()) + "\n"
    files[VALUE_PATHS_PATH] = "\n".join(value_paths()) + "\n"
    for path, text in files.items():
        if args.write:
            path.write_text(text, encoding="utf-8")
        state = "same" if path.is_file() and path.read_text(encoding="utf-8") == text else "differs"
        print(f"{path}: {state}")


if __name__ == "__main__":
    main()
