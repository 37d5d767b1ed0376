"""Typing-candidate recall: is the text a task needs typed among the candidates the policy scores?

A scoring policy can only type what ``build_candidates`` offers. For each task whose solution types
something (an alarm's hour and minute, a web search's query, a shop's address and product), the
scripted expert plays it (distractor dialogs off, seed 0) and, at every step where it types, the
typing candidates built from the instruction and that screen's compact text are checked for one the
field takes as the same value (a clock field reads an integer, "07" is 7; the URL bar and a shop's
search read lower-cased, space-normalised text, the URL bar without "www."). A task counts as
covered when every typing step is. "before" is the candidate code as it was before free-phrasing
spans (``_before_spans``, a frozen copy of the old ``instruction_spans``), "after" is the current
one, on the same steps in one run.

Sets: the development free phrasings (bench/data/free_phrasings_dev.jsonl, written for tuning;
the held-back bench/data/free_phrasings.jsonl is never read here) as labelled, with the parser's
read rate; the validation selections of the generated tasks (validation_words, validation_unseen;
never test). Also: mean and max candidates per step, and how many generated instructions' typing
spans changed (before vs after) over all of train and test (what the demo trains and scores on).

    python -m bench.typing_candidates [--out bench/results/typing_candidates.json]
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench._common import RESULTS
from bench.free_phrasings import load_phrasings
from distrl_core.envs.actions import Action, ActionKind
from distrl_core.envs.protocol import Task
from distrl_core.policy.candidates import build_candidates, instruction_spans, parse_compact_tree
from simulators.simdroid.catalog import normalize_query, normalize_url

DEV = Path(__file__).parent / "data" / "free_phrasings_dev.jsonl"
VALIDATION = ("validation_words", "validation_unseen")
Spans = Callable[[str], list[tuple[str, str]]]

# -- the candidate code before free-phrasing spans (commit 32b66bd), kept to measure "before" ----
_QUOTED = re.compile(r'"([^"]+)"')
_ADDRESS = re.compile(r"\b(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,}\b", re.IGNORECASE)
_TIME = re.compile(r"\b(\d{1,2}):(\d{2})(?:\s*([ap])\.?m\b\.?)?", re.IGNORECASE)
_UNQUOTED_QUERY = re.compile(
    r"\b(?:search(?: the web)? for|look up|google|find)\s+([^,.;:!?\"]+)", re.IGNORECASE
)


def _before_spans(instruction: str) -> list[tuple[str, str]]:
    spans: list[tuple[str, str]] = []
    quoted = _QUOTED.findall(instruction)
    spans += [("text", q.strip()) for q in quoted if q.strip()]
    unquoted = _QUOTED.sub(" ", instruction)
    spans += [("address", m.group(0).lower()) for m in _ADDRESS.finditer(unquoted)]
    for hour_text, minute_text, half in _TIME.findall(unquoted):
        hour, minute = int(hour_text), int(minute_text)
        if half:
            hour = hour % 12 + (12 if half.lower() == "p" else 0)
        if hour < 24 and minute < 60:
            spans += [("hour", str(hour)), ("minute", str(minute))]
    if not quoted:
        for match in _UNQUOTED_QUERY.finditer(unquoted):
            words = match.group(1).strip()
            if words and not _ADDRESS.fullmatch(words):
                spans.append(("query", words))
    seen: set[str] = set()
    unique = []
    for kind, text in spans:
        if text not in seen:
            seen.add(text)
            unique.append((kind, text))
    return unique


# -- one step ----------------------------------------------------------------------------------


def typed_texts(spans: Spans, instruction: str, ui_text: str) -> list[str]:
    """The typing candidates' texts on a screen (none without a focused field), as build_candidates
    adds them."""
    if not any(line.focused_field for line in parse_compact_tree(ui_text)):
        return []
    return list(dict.fromkeys(text for _kind, text in spans(instruction)))


def takes_as_same(field: str | None, typed: str, needed: str) -> bool:
    """Whether the focused ``field`` takes ``typed`` as the value ``needed`` (what the expert types)."""
    if field is not None and field.startswith("clock."):
        try:
            return int(typed.strip()) == int(needed.strip())
        except ValueError:
            return False
    if normalize_query(typed) == normalize_query(needed):
        return True
    return field == "chrome.url" and normalize_url(typed) == normalize_url(needed)


def play(task: Task) -> list[dict[str, Any]]:
    """The expert's steps on ``task``: per step the screen text, the focused field and the typed
    text if it types."""
    from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
    from simulators.simdroid.device import SimDroidConfig
    from simulators.simdroid.expert import expert_action

    env = SimDroidEnv(
        SimDroidEnvConfig(device=SimDroidConfig(distractor_prob=0.0), screenshots=False, ui_xml=False)
    )
    observation = env.reset(task, seed=0)
    steps = []
    for _ in range(task.horizon):
        action: Action = expert_action(env, task)
        typed = action.text if action.kind is ActionKind.TYPE else None
        steps.append({"ui": observation.ui_text, "field": env.device.state.focus, "typed": typed})
        result = env.step(action)
        observation = result.observation
        if result.done:
            break
    return steps


def measure(tasks: list[Task]) -> dict[str, Any]:
    """Per kind and overall: tasks that type, those covered before and after, typing steps, and the
    candidates per step (all of them; the typing ones on typing steps)."""
    rows: dict[str, dict[str, Any]] = defaultdict(lambda: defaultdict(int))
    counts: dict[str, dict[str, list[int]]] = {"before": defaultdict(list), "after": defaultdict(list)}
    misses: list[dict[str, Any]] = []
    for task in tasks:
        steps = play(task)
        row = rows[task.kind]
        row["tasks"] += 1
        typing = [s for s in steps if s["typed"] is not None]
        covered = {"before": True, "after": True}
        for step in steps:
            others = sum(
                c.action.kind is not ActionKind.TYPE for c in build_candidates(task.instruction, step["ui"])
            )
            for label, spans in (("before", _before_spans), ("after", instruction_spans)):
                offered = typed_texts(spans, task.instruction, step["ui"])
                counts[label]["all"].append(others + len(offered))
                if step["typed"] is None:
                    continue
                counts[label]["typing"].append(len(offered))
                hit = any(takes_as_same(step["field"], text, step["typed"]) for text in offered)
                row[f"steps_covered_{label}"] += hit
                covered[label] &= hit
                if not hit and label == "after":
                    misses.append({"instruction": task.instruction, "field": step["field"],
                                   "needed": step["typed"], "offered": offered})  # fmt: skip
        if typing:
            row["typing_tasks"] += 1
            row["typing_steps"] += len(typing)
            row["covered_before"] += covered["before"]
            row["covered_after"] += covered["after"]
    per_kind = {kind: _recall(dict(row)) for kind, row in sorted(rows.items())}
    total: dict[str, int] = defaultdict(int)
    for row in rows.values():
        for key, value in row.items():
            total[key] += value
    return {
        "overall": _recall(dict(total)),
        "per_kind": per_kind,
        "candidates_per_step": {label: _spread(c) for label, c in counts.items()},
        "misses_after": misses,
    }


def _recall(row: dict[str, int]) -> dict[str, Any]:
    n = row.get("typing_tasks", 0)
    out: dict[str, Any] = {"tasks": row.get("tasks", 0), "typing_tasks": n}
    for label in ("before", "after"):
        out[f"recall_{label}"] = round(row.get(f"covered_{label}", 0) / n, 4) if n else None
    return out


def _spread(counts: dict[str, list[int]]) -> dict[str, Any]:
    return {
        name: {"mean": round(sum(v) / len(v), 2), "max": max(v), "steps": len(v)}
        for name, v in counts.items()
        if v
    }


def changed_generated_instructions(splits: tuple[str, ...] = ("train", "test")) -> dict[str, int]:
    """Generated instructions (both families) whose typing spans differ before/after: the typing
    candidates are those spans on any screen with a focused field, so equal spans mean equal
    candidate sets on every screen a policy can reach."""
    from simulators.simdroid.tasks import load_tasks

    instructions = sorted({t.instruction for split in splits for t in load_tasks(split=split)})
    changed = sum(_before_spans(i) != instruction_spans(i) for i in instructions)
    return {"instructions": len(instructions), "changed": changed}


def parse_rate(phrasings: list[Any]) -> dict[str, Any]:
    """Per kind: phrasings the free-text parser reads as labelled."""
    from simulators.simdroid.free_text import Parsed, parse_instruction

    rows: dict[str, list[bool]] = defaultdict(list)
    for p in phrasings:
        found = parse_instruction(p.text)
        rows[p.kind].append(isinstance(found, Parsed) and (found.kind, found.params) == (p.kind, p.params))
    every = [ok for oks in rows.values() for ok in oks]
    per_kind = {k: f"{sum(v)}/{len(v)}" for k, v in sorted(rows.items())}
    return {"agrees": sum(every), "of": len(every), "per_kind": per_kind}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default=str(RESULTS / "typing_candidates.json"))
    args = parser.parse_args(argv)
    from simulators.simdroid.free_task import make_task
    from simulators.simdroid.tasks import load_tasks

    phrasings = load_phrasings(DEV.read_text(encoding="utf-8").splitlines(), str(DEV))
    result: dict[str, Any] = {
        "bench": "typing_candidates",
        "before": "the frozen copy of instruction_spans as of commit 32b66bd (bench/typing_candidates.py)",
        "dev_free_phrasings": {
            "data": str(DEV.relative_to(Path(__file__).parents[1])),
            "parser": parse_rate(phrasings),
            **measure([make_task(p.text, p.kind, p.params) for p in phrasings]),
        },
    }
    for split in VALIDATION:
        result[split] = measure(load_tasks(split=split))
    result["generated_instructions_changed"] = changed_generated_instructions()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    dev = result["dev_free_phrasings"]
    print(f"dev free phrasings: parser reads {dev['parser']['agrees']}/{dev['parser']['of']} as labelled")
    for name in ("dev_free_phrasings", *VALIDATION):
        section = result[name]
        print(f"{name}: typing recall {section['overall']['recall_before']} -> {section['overall']['recall_after']}"
              f" ({section['overall']['typing_tasks']} tasks that type)")  # fmt: skip
        for kind, row in section["per_kind"].items():
            if row["typing_tasks"]:
                print(f"  {kind:<18} {row['recall_before']} -> {row['recall_after']} ({row['typing_tasks']})")
        for label, spread in section["candidates_per_step"].items():
            print(f"  candidates {label}: {spread}")
    print(
        f"generated train+test instructions whose typing spans changed: {result['generated_instructions_changed']}"
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
