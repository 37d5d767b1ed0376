"""One ``bench.learning_curve`` result from several runs of the same command, split by seed or method.

A bench too large for one session runs in parts (e.g. seeds 0-2, then 3-4 in a later session; or
two methods per part): this joins them into the document a single run would have written (summary
with intervals over every seed, paired differences, the PNG). It refuses parts whose settings differ
in anything but the seeds, methods and worker count; a (seed, method) run given twice; a seed whose
warm start differs between parts (its runs would not pair: the code or machine changed); and parts
that leave a method without a seed. A joined table never mixes two configurations.

    .venv/bin/python -m bench.combine_curves PART.json PART.json [...] --out bench/results/NAME.json
"""

from __future__ import annotations

import argparse
import json
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from bench._curve_settings import CurveSettings
from bench.learning_curve import print_summary, summarise
from distrl_core.learner.config import LearnerConfig

# Settings that may differ between parts: which seeds and methods a part ran, how, where it wrote.
PER_PART_SETTINGS = frozenset({"seeds", "methods", "jobs", "out", "no_timing", "policy"})


class PartsDisagree(ValueError):
    """The parts are not one experiment split by seed or method."""


def _comparable(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings that must agree. A part written before a setting existed lacks its key and ran
    as the setting's default does (an option is added with the old behaviour as its default), so a
    missing key reads as that default, of the bench's settings and of the learner's alike."""
    values = {f.name: f.default for f in fields(CurveSettings) if f.default is not MISSING}
    values |= {k: v for k, v in settings.items() if k not in PER_PART_SETTINGS}
    if "learner_defaults" in values:
        values["learner_defaults"] = LearnerConfig().to_dict() | values["learner_defaults"]
    return values


def _check_settings(documents: list[dict[str, Any]], names: list[str]) -> None:
    reference = _comparable(documents[0]["settings"])
    for document, name in zip(documents[1:], names[1:], strict=True):
        other = _comparable(document["settings"])
        for key in sorted(reference.keys() | other.keys()):
            if reference.get(key) != other.get(key):
                raise PartsDisagree(
                    f"{name} was run with {key}={other.get(key)!r} but {names[0]} with "
                    f"{reference.get(key)!r}: rerun that part with the same settings, only other "
                    "--seeds or --methods"
                )


def _runs_by_key(
    documents: list[dict[str, Any]], names: list[str]
) -> tuple[dict[tuple[str, int], dict], dict[tuple[str, int, str], tuple[dict, str]]]:
    """Warm starts by (family, seed) and runs by (family, seed, method), each given once."""
    warm: dict[tuple[str, int], dict] = {}
    runs: dict[tuple[str, int, str], tuple[dict, str]] = {}
    for document, name in zip(documents, names, strict=True):
        for start in document["warm_starts"]:
            key = (start["family"], start["seed"])
            # Parts split by method pair their seeds only if each seed began from the same weights.
            if key in warm and warm[key]["heldout_success"] != start["heldout_success"]:
                raise PartsDisagree(
                    f"seed {key[1]} ({key[0]}) starts from a different warm start in {name} "
                    f"({start['heldout_success']:.4f} vs {warm[key]['heldout_success']:.4f}): the code "
                    "or machine changed between the parts, so their runs do not pair; rerun both"
                )
            warm.setdefault(key, start)
        for run in document["runs"]:
            run_key = (run["family"], run["seed"], run["method"])
            if run_key in runs:
                raise PartsDisagree(
                    f"{run['method']} on seed {run['seed']} ({run['family']}) is in both "
                    f"{runs[run_key][1]} and {name}: give each seed and method in one part only"
                )
            runs[run_key] = (run, name)
    return warm, runs


def combine(documents: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    """The joined document; PartsDisagree names the first setting, seed or method that is wrong."""
    if len(documents) < 2:
        raise PartsDisagree("give at least two parts to combine")
    _check_settings(documents, names)
    warm, runs = _runs_by_key(documents, names)
    families = documents[0]["settings"]["family"]
    methods = list(dict.fromkeys(m for d in documents for m in d["settings"]["methods"]))
    seeds = sorted({seed for _, seed in warm})
    missing = [
        f"{method} on seed {seed} ({family})"
        for family in families
        for method in methods
        for seed in seeds
        if (family, seed, method) not in runs
    ]
    if missing:
        raise PartsDisagree(
            f"the parts do not cover every method on every seed, missing: {', '.join(missing[:5])}"
            f"{' …' if len(missing) > 5 else ''}; run those, then combine again"
        )
    ordered_warm = [warm[key] for key in sorted(warm)]
    ordered_runs = [
        runs[family, seed, method][0] for family in families for method in methods for seed in seeds
    ]
    settings = {**documents[0]["settings"], "seeds": seeds, "methods": methods}
    settings["jobs"] = [d["settings"]["jobs"] for d in documents]
    return {
        "benchmark": "learning_curve",
        "combined_from": [
            {
                "part": name,
                "seeds": d["settings"]["seeds"],
                "methods": d["settings"]["methods"],
                "machine": d["machine"],
                "wall_s": d["wall_s"],
            }
            for d, name in zip(documents, names, strict=True)
        ],
        "machine": documents[0]["machine"],
        "settings": settings,
        "wall_s": round(sum(d["wall_s"] for d in documents), 1),
        "update_timing": next((d["update_timing"] for d in documents if d.get("update_timing")), None),
        "summary": summarise(ordered_warm, ordered_runs, families, methods),
        "warm_starts": ordered_warm,
        "runs": ordered_runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "parts", type=Path, nargs="+", help="learning-curve results of one command split by seed or method"
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    documents = [json.loads(path.read_text()) for path in args.parts]
    try:
        document = combine(documents, [str(p) for p in args.parts])
    except PartsDisagree as error:
        raise SystemExit(f"cannot combine: {error}") from None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2))
    from bench._curves import plot_curves

    plot_curves(document, args.out.with_suffix(".png"))
    evaluated_on = "validation" if document["settings"].get("validation") else "held-out"
    print_summary(document["summary"], evaluated_on)
    print(
        f"\nwrote {args.out} and {args.out.with_suffix('.png')} ({len(document['settings']['seeds'])} seeds)"
    )


if __name__ == "__main__":
    main()
