"""Paired comparison of two ``bench.learning_curve`` results run on the same seeds (e.g. a default
against a candidate change, both with ``--validation``): per (family, method) the mean final score
of each with its 95 % t-interval, and the per-seed difference (candidate − base) with its interval;
the warm starts likewise.

    .venv/bin/python -m bench.paired --base bench/results/BASE.json [MORE_SEEDS.json ...]
        --candidate bench/results/CANDIDATE.json [...]

Several files on a side are one result (e.g. the same command run on seeds 0-4, then on 5-9).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench._stats import fmt_interval, t_interval


def paired(base: dict[str, Any], candidate: dict[str, Any]) -> dict[str, Any]:
    """{"<family>/<method>": {base, candidate, difference, seeds}} over the seeds both have."""

    def finals(document: dict[str, Any]) -> dict[tuple[str, str, int], float]:
        scores = {(r["family"], r["method"], r["seed"]): r["final_heldout"] for r in document["runs"]}
        for w in document["warm_starts"]:
            scores[w["family"], "warm_start", w["seed"]] = w["heldout_success"]
        return scores

    a, b = finals(base), finals(candidate)
    out: dict[str, Any] = {}
    for family, method in sorted({(f, m) for f, m, _ in a.keys() & b.keys()}):
        seeds = sorted(s for f, m, s in a.keys() & b.keys() if (f, m) == (family, method))
        xs, ys = [a[family, method, s] for s in seeds], [b[family, method, s] for s in seeds]
        out[f"{family}/{method}"] = {
            "seeds": seeds,
            "base": t_interval(xs),
            "candidate": t_interval(ys),
            "difference": t_interval([y - x for x, y in zip(xs, ys, strict=True)]),
            "per_seed_difference": [round(y - x, 4) for x, y in zip(xs, ys, strict=True)],
        }
    if not out:
        raise SystemExit("the two results share no (family, method, seed): run them on the same seeds")
    return out


def merged(paths: list[Path]) -> dict[str, Any]:
    """The runs and warm starts of several result files, as one document."""
    documents = [json.loads(path.read_text()) for path in paths]
    return {
        "runs": [r for d in documents for r in d["runs"]],
        "warm_starts": [w for d in documents for w in d["warm_starts"]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, nargs="+", required=True)
    parser.add_argument("--candidate", type=Path, nargs="+", required=True)
    args = parser.parse_args()
    result = paired(merged(args.base), merged(args.candidate))
    for key, entry in result.items():
        print(
            f"{key} ({len(entry['seeds'])} seeds): base {fmt_interval(entry['base'])}; "
            f"candidate {fmt_interval(entry['candidate'])}; paired difference "
            f"{fmt_interval(entry['difference'])} per seed {entry['per_seed_difference']}"
        )


if __name__ == "__main__":
    main()
