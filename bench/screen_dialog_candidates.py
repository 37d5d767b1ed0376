"""Tap candidates per step of the noisy expert's demonstrations, tree against screen, on all steps
and on the steps under a distractor dialog (where the UI dump lists the dialog alone and the OCR
also reads the page dimmed under it).

    python -m bench.screen_dialog_candidates --per-kind 3 --out screen_dialog_candidates

Writes ``bench/results/<out>.json``: per observation the steps, the demonstrations' success, the
mean count of tap candidates (``build_candidates``' element taps), the same on dialog steps, and
the steps whose action no candidate expresses.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from distrl_core.envs.screen import text_key
from distrl_core.policy.candidates import build_candidates, find_candidate
from simulators.simdroid.screens import GENERIC_DIALOGS, SHOP_DIALOGS
from simulators.simdroid.tasks import load_tasks
from simulators.warm_start import WarmStartConfig, collect_demonstrations

RESULTS = Path(__file__).parent / "results"
TITLES = [text_key(d["title"]) for d in GENERIC_DIALOGS + SHOP_DIALOGS]


def candidate_stats(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The demonstrations' candidate counts, overall and on the steps showing a dialog's title."""
    taps, on_dialog, unmatched, unmatched_dialog = [], [], 0, 0
    for row in rows:
        candidates = build_candidates(row["instruction"], row["observation_text"])
        count = sum(1 for c in candidates if c.line is not None)
        missing = find_candidate(candidates, row["action"]) is None
        taps.append(count)
        unmatched += missing
        if any(title in text_key(row["observation_text"]) for title in TITLES):
            on_dialog.append(count)
            unmatched_dialog += missing
    episodes = {row["episode_id"]: bool(row["episode_success"]) for row in rows}
    return {
        "steps": len(rows),
        "success": round(sum(episodes.values()) / max(1, len(episodes)), 3),
        "tap_candidates_mean": round(sum(taps) / max(1, len(taps)), 2),
        "dialog_steps": len(on_dialog),
        "tap_candidates_on_dialog_steps": round(sum(on_dialog) / max(1, len(on_dialog)), 2),
        "unmatched_steps": unmatched,
        "unmatched_on_dialog_steps": unmatched_dialog,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-kind", type=int, default=3, help="first N train tasks of each kind")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--paraphrase", type=float, default=0.8)
    parser.add_argument("--out", default="screen_dialog_candidates")
    args = parser.parse_args()
    by_kind: dict[str, list[Any]] = {}
    for task in load_tasks("general", "train"):
        by_kind.setdefault(task.kind, []).append(task)
    tasks = [t for kind in sorted(by_kind) for t in by_kind[kind][: args.per_kind]]
    report: dict[str, Any] = {"tasks": len(tasks), "seed": args.seed, "paraphrase": args.paraphrase}
    for observation in ("tree", "screen"):
        config = WarmStartConfig(seed=args.seed, observation=observation, paraphrase=args.paraphrase)
        started = time.process_time()
        rows = collect_demonstrations(config, tasks=tasks).rows
        report[observation] = {**candidate_stats(rows), "cpu_s": round(time.process_time() - started, 1)}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
