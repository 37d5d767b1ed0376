"""Two bases' demo runs side by side, paired by seed: held-out success of the warm start and the final
version, the RL gain, instructions with a word unseen in training against those without, and each
phrasing template; with a figure.

Each side is a ``bench.demo_seeds`` result (the same seeds, protocol and split on both sides) and,
optionally, the ``bench.heldout_words`` result made from the summaries that run kept. Per measure:
each side's mean over the seeds both sides ran with its 95 % t-interval, and the per-seed difference
(candidate − reference) with its interval, so a difference whose interval excludes 0 is one the
seeds agree on. Writes bench/results/<out>.{json,png}.

    python -m bench.demo_compare --reference bench/results/demo_seeds_test_tiny.json \\
            bench/results/heldout_words_test_tiny.json \\
        --candidate bench/results/demo_seeds_test_minilm.json bench/results/heldout_words_test_minilm.json \\
        [--out demo_compare_test]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench._common import RESULTS, pyplot, save_figure, write_result
from bench._stats import fmt_interval, t_interval

SIDES = ("reference", "candidate")
SEED_MEASURES = {  # measure -> what it reads from a demo_seeds run
    "warm_start": "heldout_success_warm_start",
    "final": "heldout_success_final",
    "train_tasks_final": "in_distribution_final",
}


def seed_values(demo: dict[str, Any]) -> dict[str, dict[int, float]]:
    """{measure: {seed: value}} of one demo_seeds result, the gain included."""
    values: dict[str, dict[int, float]] = {m: {} for m in [*SEED_MEASURES, "gain"]}
    for run in demo["runs"]:
        for measure, key in SEED_MEASURES.items():
            values[measure][run["seed"]] = run[key]
        values["gain"][run["seed"]] = run["heldout_success_final"] - run["heldout_success_warm_start"]
    return values


def word_values(words: dict[str, Any]) -> dict[str, dict[int, float]]:
    """{measure: {seed: value}} of one heldout_words result, final versions: the unseen-word and
    no-unseen-word shares, their gap, and each template's success."""
    values: dict[str, dict[int, float]] = {}
    for run in words["runs"]:
        final = run["final"]
        if final["unseen_word"] is not None and final["no_unseen_word"] is not None:
            values.setdefault("unseen_word", {})[run["seed"]] = final["unseen_word"]
            values.setdefault("no_unseen_word", {})[run["seed"]] = final["no_unseen_word"]
            values.setdefault("word_gap", {})[run["seed"]] = final["no_unseen_word"] - final["unseen_word"]
        for template, success in final["templates"].items():
            values.setdefault(f"template:{template}", {})[run["seed"]] = success
    return values


def compare(reference: dict[str, dict[int, float]], candidate: dict[str, dict[int, float]]) -> dict[str, Any]:
    """Per measure both sides have: the seeds, each side's interval and the paired difference."""
    out: dict[str, Any] = {}
    for measure in [m for m in reference if m in candidate]:
        seeds = sorted(reference[measure].keys() & candidate[measure].keys())
        if not seeds:
            continue
        xs = [reference[measure][s] for s in seeds]
        ys = [candidate[measure][s] for s in seeds]
        out[measure] = {
            "seeds": seeds,
            "reference": t_interval(xs),
            "candidate": t_interval(ys),
            "difference": t_interval([y - x for x, y in zip(xs, ys, strict=True)]),
        }
    return out


def examples(words: dict[str, Any] | None) -> dict[str, str]:
    return {} if words is None else dict(words["runs"][0]["final"]["template_examples"])


def plot(result: dict[str, Any], names: dict[str, str], path: Path) -> None:
    plt = pyplot()
    measures = result["measures"]
    templates = sorted(m for m in measures if m.startswith("template:"))
    fig, axes = plt.subplots(1, 3 if templates else 1, figsize=(15 if templates else 5, 5.5), squeeze=False)
    colours = {"reference": "tab:blue", "candidate": "tab:orange"}
    ax = axes[0][0]
    for offset, side in ((-0.08, "reference"), (0.08, "candidate")):
        for seed in measures["final"]["seeds"]:
            warm = result["per_seed"][side]["warm_start"][str(seed)]
            final = result["per_seed"][side]["final"][str(seed)]
            ax.plot([offset, 1 + offset], [warm, final], color=colours[side], alpha=0.35, marker="o", ms=3)
        for x, measure in ((offset, "warm_start"), (1 + offset, "final")):
            summary = measures[measure][side]
            low, high = summary["ci95"]
            ax.errorbar(
                x,
                summary["mean"],
                yerr=[[summary["mean"] - low], [high - summary["mean"]]],
                color=colours[side],
                marker="s",
                capsize=4,
                lw=2,
                label=names[side] if measure == "final" else None,
            )
    ax.set_xticks([0, 1], ["warm start", "final"])
    ax.set_ylabel("held-out success (per seed; mean, 95 % t)")
    ax.set_ylim(0, 1.02)
    ax.set_title("held-out General, paired seeds")
    ax.legend(loc="lower right")
    if templates:
        ax = axes[0][1]
        for offset, side in ((-0.18, "reference"), (0.18, "candidate")):
            for x, measure in enumerate(("unseen_word", "no_unseen_word")):
                summary = measures[measure][side]
                low, high = summary["ci95"] or (summary["mean"], summary["mean"])
                ax.bar(
                    x + offset,
                    summary["mean"],
                    width=0.34,
                    color=colours[side],
                    yerr=[[summary["mean"] - low], [high - summary["mean"]]],
                    capsize=4,
                    label=names[side] if x == 0 else None,
                )
        ax.set_xticks([0, 1], ["an instruction word\nunseen in training", "no unseen word"])
        ax.set_ylim(0, 1.05)
        ax.set_title("final version, by instruction words")
        ax.legend(loc="lower right")
        ax = axes[0][2]
        labels = [t.removeprefix("template:") for t in templates]
        for offset, side in ((-0.2, "reference"), (0.2, "candidate")):
            means = [measures[t][side]["mean"] for t in templates]
            ax.barh(
                [i + offset for i in range(len(templates))],
                means,
                height=0.38,
                color=colours[side],
                label=names[side],
            )
        ax.set_yticks(range(len(templates)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, 1.02)
        ax.set_title("final version, per test phrasing template")
        ax.legend(loc="lower right", fontsize=8)
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for side in SIDES:
        parser.add_argument(
            f"--{side}",
            nargs="+",
            required=True,
            metavar="JSON",
            help="a demo_seeds result, then optionally its heldout_words result",
        )
    parser.add_argument("--out", default="demo_compare_test")
    args = parser.parse_args(argv)
    documents: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {}
    for side in SIDES:
        paths = getattr(args, side)
        if len(paths) > 2:
            parser.error(
                f"--{side} takes a demo_seeds result and at most one heldout_words result, got {len(paths)} files"
            )
        demo = json.loads(Path(paths[0]).read_text())
        if demo.get("benchmark") != "demo_seeds":
            parser.error(
                f"{paths[0]} is not a bench.demo_seeds result (its 'benchmark' is {demo.get('benchmark')!r})"
            )
        documents[side] = (demo, json.loads(Path(paths[1]).read_text()) if len(paths) == 2 else None)
    splits = {documents[s][0].get("heldout_split", "test") for s in SIDES}
    if len(splits) != 1:
        parser.error(
            f"the two sides were scored on different splits ({', '.join(sorted(splits))}): they do not pair"
        )
    per_seed = {}
    for side, (demo, words) in documents.items():
        per_seed[side] = seed_values(demo) | (word_values(words) if words is not None else {})
    names = {s: documents[s][0].get("base") or "tiny" for s in SIDES}
    result = {
        "benchmark": "demo_compare",
        "command": "python -m bench.demo_compare "
        + " ".join(f"--{s} {' '.join(getattr(args, s))}" for s in SIDES),
        "heldout_split": splits.pop(),
        "names": names,
        "sources": {s: getattr(args, s) for s in SIDES},
        "template_examples": examples(documents["candidate"][1]) or examples(documents["reference"][1]),
        "measures": compare(per_seed["reference"], per_seed["candidate"]),
        "per_seed": {
            s: {m: {str(k): v for k, v in values.items()} for m, values in per_seed[s].items()} for s in SIDES
        },
    }
    path = write_result(args.out, result)
    plot(result, names, (RESULTS / args.out if "/" not in args.out else Path(args.out)).with_suffix(".png"))
    for measure, row in result["measures"].items():
        print(
            f"{measure:28s} {names['reference']} {fmt_interval(row['reference'])}  {names['candidate']} "
            f"{fmt_interval(row['candidate'])}  difference {fmt_interval(row['difference'])}"
        )
    print(f"wrote {path} and its PNG")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
