"""Where held-out success goes, over the seeds `bench.demo_seeds` kept: instructions with a word the
training text lacks against those without, and the success of each phrasing template.

A word is "unseen in training" when the tiny default's vocabulary, built from the text a policy
trains on (the train split's instructions, screens and candidates, or the fit part of
``validation_split(words=True)`` for a validation run), lacks it: the same definition for both
bases, so the gap is comparable. A pretrained encoder's tokenizer knows such words; the tiny model
reads them as ``[UNK]``. Per seed, the kept summary's per-task success of the warm start and of the
final version (every held-out task played 3 times under fixed seeds) gives both shares; over seeds
the mean and 95 % t-interval of each, and of the gap.

    python -m bench.heldout_words bench/results/demo_seeds/<run>/seed*/summary.json [...]
        [--out bench/results/heldout_words.json]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench._stats import fmt_interval, t_interval
from bench.validation_words import vocabulary
from distrl_core.policy.tokenizer import split_words
from simulators.simdroid.tasks import get_task

STAGES = ("warm_start", "final")


def split_by_words(per_task: dict[str, float], known: set[str]) -> dict[str, Any]:
    """Mean per-task success of tasks whose instruction holds an unseen word, and of the others;
    and per phrasing template (tasks are equally weighted: each was played equally often)."""
    unseen: list[float] = []
    seen: list[float] = []
    templates: dict[str, list[float]] = defaultdict(list)
    examples: dict[str, str] = {}
    for task_id, success in per_task.items():
        task = get_task(task_id)
        words = split_words(task.instruction)
        (unseen if any(w not in known for w in words) else seen).append(success)
        template = str(task.params.get("template", task.kind))
        templates[template].append(success)
        examples.setdefault(template, task.instruction)
    return {
        "unseen_word": sum(unseen) / len(unseen) if unseen else None,
        "no_unseen_word": sum(seen) / len(seen) if seen else None,
        "tasks_unseen_word": len(unseen),
        "tasks_no_unseen_word": len(seen),
        "templates": {t: sum(v) / len(v) for t, v in sorted(templates.items())},
        "template_examples": examples,
    }


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for stage in STAGES:
        rows = [r[stage] for r in runs]
        both = [r for r in rows if r["unseen_word"] is not None and r["no_unseen_word"] is not None]
        templates = sorted({t for r in rows for t in r["templates"]})
        out[stage] = {
            "unseen_word": t_interval([r["unseen_word"] for r in both]),
            "no_unseen_word": t_interval([r["no_unseen_word"] for r in both]),
            "gap": t_interval([r["no_unseen_word"] - r["unseen_word"] for r in both]),
            "templates": {
                t: t_interval([r["templates"][t] for r in rows if t in r["templates"]]) for t in templates
            },
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("summaries", nargs="+", help="summary.json files kept by bench.demo_seeds")
    parser.add_argument("--out", default="bench/results/heldout_words.json")
    args = parser.parse_args()
    vocabularies: dict[str, set[str]] = {}
    runs: list[dict[str, Any]] = []
    for path in args.summaries:
        summary = json.loads(Path(path).read_text())
        if "heldout_tasks_final" not in summary:
            raise SystemExit(f"{path} has no per-task success (heldout_tasks_final): re-run its seed")
        corpus = "fit_words" if summary.get("heldout_split") == "validation_words" else "train"
        known = vocabularies.setdefault(corpus, vocabulary(corpus))
        run = {
            "path": path,
            "seed": summary.get("seed"),
            "base": summary.get("base"),
            "split": summary.get("heldout_split", "test"),
            **{s: split_by_words(summary[f"heldout_tasks_{s}"], known) for s in STAGES},
        }
        runs.append(run)
        print(
            f"{path}: final {run['final']['unseen_word']:.3f} with an unseen word "
            f"({run['final']['tasks_unseen_word']} tasks) vs {run['final']['no_unseen_word']:.3f} without",
            flush=True,
        )
    summary = summarise(runs)
    result = {"runs": runs, "summary": summary}
    for stage in STAGES:
        s = summary[stage]
        print(
            f"{stage}: unseen word {fmt_interval(s['unseen_word'])}, none {fmt_interval(s['no_unseen_word'])}, "
            f"gap {fmt_interval(s['gap'])}"
        )
        for template, value in s["templates"].items():
            print(
                f"  {template:18s} {fmt_interval(value)}  ({runs[0][stage]['template_examples'].get(template, '')})"
            )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
