"""The demo over seeds: `distrl demo --seed s` for each seed, one process after the other (each run
owns the machine, as a user's `make demo` does), and the summary over seeds.

Per seed it keeps the demo's own `summary.json` (held-out success of the warm start and of the last
version with their 95 % Wilson intervals, the continuous evaluator's curve, learner updates); over
seeds the mean gain and final success with 95 % t-intervals, and how many seeds gain at least
``--target`` with disjoint intervals. Writes bench/results/demo_seeds.json.

    .venv/bin/python -m bench.demo_seeds [--seeds 0 1 2 3 4] [--minutes 6] [--target 0.15]
        [--warm-start-updates 300] [--reuse-kept]

Each seed's summary is kept under ``--root``/ws<updates>-<minutes>min/seed<s>/; with
``--reuse-kept`` a seed already kept there is read, not run again, so the five seeds can be run
in parts across sessions and reported together.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench._common import machine, write_result
from bench._stats import fmt_interval, t_interval


def run_seed(seed: int, minutes: float, root: Path, warm_start_updates: int | None = None) -> dict[str, Any]:
    """One demo in its own process; its summary, kept beside the others."""
    started = time.monotonic()
    argv = [sys.executable, "-m", "ops.cli", "demo", "--seed", str(seed), "--minutes", str(minutes)]
    if warm_start_updates is not None:
        argv += ["--warm-start-updates", str(warm_start_updates)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    summary_path = Path(".distrl/demo/summary.json")
    if done.returncode != 0 or not summary_path.exists():
        raise RuntimeError(
            f"demo --seed {seed} exited with {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    kept = root / f"seed{seed}"
    kept.mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(".distrl/demo/learning_curve.png"), kept / "learning_curve.png")
    summary = json.loads(summary_path.read_text())
    summary["process_wall_s"] = round(time.monotonic() - started, 1)
    (kept / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def separated_gain(run: dict[str, Any], target: float) -> bool:
    """Gained at least `target` and the two 95 % intervals do not overlap."""
    gain = run["heldout_success_final"] - run["heldout_success_warm_start"]
    return gain >= target and run["heldout_ci_final"][0] > run["heldout_ci_warm_start"][1]


def summarise(runs: list[dict[str, Any]], target: float) -> dict[str, Any]:
    gains = [r["heldout_success_final"] - r["heldout_success_warm_start"] for r in runs]
    return {
        "gain": t_interval(gains),
        "warm_start": t_interval([r["heldout_success_warm_start"] for r in runs]),
        "final": t_interval([r["heldout_success_final"] for r in runs]),
        "seeds_meeting_target": sum(separated_gain(r, target) for r in runs),
        "target": f"gain >= {target} with disjoint 95 % intervals",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--minutes", type=float, default=6.0, help="the demo's RL budget")
    parser.add_argument("--target", type=float, default=0.15, help="gain a seed should reach")
    parser.add_argument(
        "--root", default=".distrl/bench/demo_seeds", help="where each seed's summary is kept"
    )
    parser.add_argument(
        "--warm-start-updates", type=int, default=None, help="the demo's SFT warm start (default: its own)"
    )
    parser.add_argument(
        "--reuse-kept",
        action="store_true",
        help="read a seed's summary kept under --root by an earlier run of the same settings instead of "
        "running it again (a bench run in parts)",
    )
    parser.add_argument("--out", default="demo_seeds")
    args = parser.parse_args()
    before = machine()
    runs = []
    root = Path(args.root) / f"ws{args.warm_start_updates or 'default'}-{args.minutes:g}min"
    for seed in args.seeds:
        kept = root / f"seed{seed}" / "summary.json"
        if args.reuse_kept and kept.exists():  # a part run earlier (a seed per session on 2 cores)
            run = json.loads(kept.read_text()) | {"reused_from": str(kept)}
        else:
            run = run_seed(seed, args.minutes, root, args.warm_start_updates)
        runs.append(run)
        print(
            f"seed {seed}: held-out {run['heldout_success_warm_start']:.3f} -> {run['heldout_success_final']:.3f} "
            f"(v{run['final_version']}, {run['process_wall_s'] / 60:.1f} min)",
            flush=True,
        )
    document = {
        "benchmark": "demo_seeds",
        "command": f"python -m bench.demo_seeds --seeds {' '.join(map(str, args.seeds))} --minutes {args.minutes:g}"
        + (f" --warm-start-updates {args.warm_start_updates}" if args.warm_start_updates is not None else ""),
        "warm_start_updates": args.warm_start_updates,
        "machine": before,
        "loadavg_after": machine()["loadavg_1_5_15"],
        "runs": runs,
        **summarise(runs, args.target),
    }
    path = write_result(args.out, document)
    print(
        f"gain {fmt_interval(document['gain'])}; final {fmt_interval(document['final'])}; "
        f"{document['seeds_meeting_target']}/{len(runs)} seeds {document['target']}; wrote {path}"
    )


if __name__ == "__main__":
    main()
