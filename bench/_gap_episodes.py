"""Greedy episodes with the scripted expert looking over the policy's shoulder, for
``bench.generalisation_gap``.

At every step the expert (noise 0, closed loop: it plans from the device state it finds) says what it
would do; a failed episode is classified by the first step where the policy did something else. The
expert is one correct path, not the only one, so the first deviation of a failed episode is a proxy
for its first wrong action; a deviation the episode recovers from does not count (only failed
episodes are classified).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from distrl_core.envs.actions import Action, ActionKind, format_action
from distrl_core.envs.protocol import Task
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from simulators.simdroid.expert import expert_action

# The first wrong action of a failed episode, by what the expert did and what the policy did instead.
CATEGORIES = {
    "grounding": "tapped another element than the expert's",
    "slider_value": "tapped the brightness slider at another value",
    "typed_text": "typed another text than the expert's",
    "type_vs_tap": "typed where the expert tapped, or tapped/pressed where it typed",
    "stopped_early": "declared the task complete before it was",
    "navigation": "a key or swipe where the expert did something else, or the reverse",
    "no_deviation": "followed the expert at every step and still failed (e.g. ran out of steps)",
}


@dataclass
class Episode:
    task: Task
    seed: int
    success: bool = False
    steps: int = 0
    first_wrong: str | None = None  # a CATEGORIES key, failed episodes only
    first_wrong_step: int | None = None
    expected: str = ""  # the expert's action text at the first deviation, with its element label
    chosen: str = ""  # the policy's, likewise
    deviations: list[str] = field(default_factory=list)


def param_value(task: Task) -> str:
    """The task's parameter value (what the test split holds out), as one comparable string."""
    p = task.params
    values = {
        "open_app": lambda: str(p["app"]),
        "toggle_setting": lambda: f"{p['setting']}={'on' if p['on'] else 'off'}",
        "set_alarm": lambda: f"{p['hour']:02d}:{p['minute']:02d}",
        "web_search": lambda: str(p["query"]),
        "set_brightness": lambda: f"{p['percent']}%",
    }
    return values.get(task.kind, lambda: str(p.get("query", p.get("site", ""))))()


def classify(expected: Action, chosen: Action) -> str:
    """Category of a deviation: the expert would have done ``expected``, the policy did ``chosen``."""
    if chosen.kind is ActionKind.STATUS:
        return "stopped_early"
    navigation = (ActionKind.KEY, ActionKind.SWIPE)
    if expected.kind in navigation or chosen.kind in navigation:
        return "navigation"
    if expected.kind is ActionKind.TYPE and chosen.kind is ActionKind.TYPE:
        return "typed_text"
    if ActionKind.TYPE in (expected.kind, chosen.kind):
        return "type_vs_tap"
    if expected.index is None and chosen.index is None:  # two taps at points: the slider
        return "slider_value"
    return "grounding"


def _describe(action: Action, labels: Sequence[str]) -> str:
    text = format_action(action)
    if action.index is not None and action.index < len(labels):
        text += f" [{labels[action.index]}]"
    return text


def run_inspected(
    policy: Any, tasks: Sequence[Task], seeds: Sequence[int], env_config: SimDroidEnvConfig
) -> list[Episode]:
    """One greedy episode per (task, seed), all acting in one batch per step."""
    jobs = [(task, seed) for task in tasks for seed in seeds]
    envs = [SimDroidEnv(env_config) for _ in jobs]
    episodes = [Episode(task, seed) for task, seed in jobs]
    observations = [env.reset(task, seed=seed) for env, (task, seed) in zip(envs, jobs, strict=True)]
    active = list(range(len(jobs)))
    while active:
        outputs = policy.act([observations[i] for i in active], greedy=True)
        still = []
        for i, output in zip(active, outputs, strict=True):
            env, episode = envs[i], episodes[i]
            expected = expert_action(env, episode.task)
            chosen = output.action
            if format_action(chosen) != format_action(expected):
                category = classify(expected, chosen)
                episode.deviations.append(category)
                if episode.first_wrong is None:
                    labels = [el.text or el.content_desc for el in env.device.elements()]
                    episode.first_wrong, episode.first_wrong_step = category, episode.steps
                    episode.expected, episode.chosen = _describe(expected, labels), _describe(chosen, labels)
            result = env.step(chosen)
            episode.steps += 1
            observations[i] = result.observation
            if result.done:
                episode.success = bool(result.info.success)
            else:
                still.append(i)
        active = still
    for episode in episodes:
        if episode.success:
            episode.first_wrong = None
        elif episode.first_wrong is None:
            episode.first_wrong = "no_deviation"
    return episodes
