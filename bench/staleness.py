"""Final held-out success of A-RIDE (Retrace) vs decoupled PPO (AReaL) as the data grows stale.

Two ways of making data stale, each at lags k (``--lags``, default 1 4 16 policy versions; the local
loop publishes one version per round of ``--updates-per-round`` updates):

- ``replay``: collectors act with the newest weights; the learner trains on replayed data up to k
  versions old (``LearnerConfig.max_policy_lag = k``).
- ``slowed``: a learner slowed on purpose: collectors act with the weights of k versions ago
  (``LoopConfig.behaviour_lag = k``), so every row is at least k versions old, and the learner keeps
  rows up to k + ``--keep-versions`` old.

Everything else is bench/learning_curve.py's protocol (one warm start per family and seed, shared by
every run; score = mean of the last 3 held-out evaluations); printed per (condition, lag, method):
the mean over seeds with its 95 % t-interval, and each method − A-RIDE paired over seeds.

    .venv/bin/python -m bench.staleness [--family general] [--seeds 0 1 2] [--lags 1 4 16]
        [--conditions replay slowed] [--methods aride decoupled_ppo] [--env-steps 8000] [--jobs 1]
        [--out bench/results/staleness.json] [--reuse EARLIER.json --rerun decoupled_ppo]

``--reuse`` takes the runs an earlier result of the same settings holds (after a change to one
method, rerun only that one with ``--rerun``); it refuses a result whose settings or warm starts
differ. Reused runs carry ``"reused": true``. Beside the JSON, a plot of final success against the
lag (``.png``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import tempfile
import time
from pathlib import Path

from bench._common import write_result
from bench._curve_settings import CurveSettings, add_curve_arguments, curve_settings
from bench._curves import plot_staleness
from bench._stats import fmt_interval, t_interval
from bench.learning_curve import METHODS, method_job, run_jobs, warm_start_job


def job_settings(base: CurveSettings, condition: str, lag: int, keep: int) -> CurveSettings:
    """The learning-curve settings of one (condition, lag) run: its loop lag and max_policy_lag."""
    if condition == "replay":
        return base.stale(behaviour_lag=0, max_policy_lag=lag)
    return base.stale(behaviour_lag=lag, max_policy_lag=lag + keep)


# Settings an earlier result must share for its runs to stand beside new ones (`--reuse`).
REUSE_KEYS = (
    "env_steps", "episodes_per_round", "updates_per_round", "group_size", "eval_tasks", "eval_episodes",
    "warm_start_updates", "warm_start_noise", "learner", "warm", "validation", "base", "keep_versions",
)  # fmt: skip


def reusable_runs(path: Path, settings: dict, rerun: list[str]) -> tuple[dict[tuple, dict], list[dict]]:
    """Runs of an earlier result to take instead of running them again, keyed (family, condition,
    lag, seed, method), except those of the methods in `rerun`; and its warm starts, which the new
    ones must equal (the reused runs started from them)."""
    earlier = json.loads(path.read_text())
    differ = [k for k in REUSE_KEYS if earlier["settings"].get(k) != settings.get(k)]
    if differ:
        raise SystemExit(
            f"--reuse {path}: its settings differ in {differ}; reuse only a result of the same protocol, "
            "or run every method again"
        )
    runs = {
        (r["family"], r["condition"], r["lag"], r["seed"], r["method"]): r
        for r in earlier["runs"]
        if r["method"] not in rerun
    }
    return runs, earlier["warm_starts"]


def check_same_warm_starts(earlier: list[dict], now: list[dict], path: Path) -> None:
    held = {(w["family"], w["seed"]): w["heldout_success"] for w in earlier}
    differ = [
        (w["family"], w["seed"])
        for w in now
        if held.get((w["family"], w["seed"]), w["heldout_success"]) != w["heldout_success"]
    ]
    if differ:
        raise SystemExit(
            f"--reuse {path}: the warm starts of {differ} now score differently, so its runs did not start "
            "from the same policies; run every method again"
        )


def summarise(runs: list[dict], keys: list[tuple[str, str, int]], methods: list[str]) -> dict:
    summary: dict[str, dict] = {}
    for family, condition, lag in keys:
        finals = {
            m: [
                r["final_heldout"]
                for r in runs
                if (r["family"], r["condition"], r["lag"], r["method"]) == (family, condition, lag, m)
            ]
            for m in methods
        }
        entry: dict = {m: {**t_interval(v), "per_seed": v} for m, v in finals.items()}
        for method in methods if "aride" in methods else []:
            if method != "aride":  # paired over seeds: each seed's runs share their warm start
                entry[f"{method}_minus_aride"] = t_interval(
                    [m - a for m, a in zip(finals[method], finals["aride"], strict=True)]
                )
        summary[f"{family}/{condition}/lag{lag}"] = entry
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--family", nargs="+", default=["general"], choices=["general", "webshop"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--lags", nargs="+", type=int, default=[1, 4, 16])
    parser.add_argument("--conditions", nargs="+", default=["replay", "slowed"], choices=["replay", "slowed"])
    parser.add_argument("--keep-versions", type=int, default=4, help="slowed: rows kept beyond the lag")
    parser.add_argument("--methods", nargs="+", default=["aride", "decoupled_ppo"], choices=sorted(METHODS))
    add_curve_arguments(parser)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", default="bench/results/staleness.json")
    parser.add_argument(
        "--reuse", type=Path, default=None, metavar="RESULT",
        help="take the runs an earlier result of the same settings has, except --rerun's methods",
    )  # fmt: skip
    parser.add_argument("--rerun", nargs="*", default=[], choices=sorted(METHODS), help="with --reuse")
    args = parser.parse_args(argv)
    if min(args.lags) < 1 or args.keep_versions < 0:
        parser.error("--lags must be >= 1 and --keep-versions >= 0")
    base = curve_settings(args)
    recorded = {
        **vars(args),
        **dataclasses.asdict(base),
        "reuse": None if args.reuse is None else str(args.reuse),
    }
    reused, earlier_warm = reusable_runs(args.reuse, recorded, args.rerun) if args.reuse else ({}, [])
    started = time.perf_counter()
    keys = [(f, c, k) for f in args.family for c in args.conditions for k in args.lags]
    with tempfile.TemporaryDirectory(prefix="staleness-") as tmp:
        directory = {(f, s): str(Path(tmp) / f"{f}-{s}") for f in args.family for s in args.seeds}
        warm = run_jobs(warm_start_job, [(f, s, base, directory[f, s]) for f, s in directory], args.jobs)
        check_same_warm_starts(earlier_warm, warm, args.reuse)
        jobs, tags, kept = [], [], []
        for family, condition, lag in keys:
            settings = job_settings(base, condition, lag, args.keep_versions)
            for seed in args.seeds:
                for method in args.methods:
                    if (earlier := reused.get((family, condition, lag, seed, method))) is not None:
                        kept.append({**earlier, "reused": True})
                        continue
                    jobs.append((family, seed, method, settings, directory[family, seed]))
                    tags.append({"condition": condition, "lag": lag})
        fresh = run_jobs(method_job, jobs, args.jobs)
        runs = kept + [{**r, **tag} for r, tag in zip(fresh, tags, strict=True)]
    summary = summarise(runs, keys, args.methods)
    document = {
        "benchmark": "staleness",
        "machine": {"platform": platform.platform(), "jobs": args.jobs},
        "settings": recorded,
        "wall_s": round(time.perf_counter() - started, 1),
        "summary": summary,
        "warm_starts": warm,
        "runs": runs,
    }
    out = write_result(args.out, document)
    plot_staleness(document, out.with_suffix(".png"))
    for key, entry in summary.items():
        print(f"\n{key}: final held-out success, mean of the last 3 evaluations")
        for method in args.methods:
            print(f"  {method:14s} {fmt_interval(entry[method])}  per seed {entry[method]['per_seed']}")
        for method in args.methods:
            if f"{method}_minus_aride" in entry:
                print(f"  {method} − aride (paired): {fmt_interval(entry[f'{method}_minus_aride'])}")
    print(f"\nwrote {out} and {out.with_suffix('.png')} in {document['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
