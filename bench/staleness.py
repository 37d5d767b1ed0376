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
the mean over seeds with its 95 % t-interval, and decoupled PPO − A-RIDE paired over seeds.

    .venv/bin/python -m bench.staleness [--family general] [--seeds 0 1 2] [--lags 1 4 16]
        [--conditions replay slowed] [--methods aride decoupled_ppo] [--env-steps 8000] [--jobs 1]
        [--out bench/results/staleness.json]
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path

from bench._common import write_result
from bench._stats import fmt_interval, t_interval
from bench.learning_curve import METHODS, method_job, parse_overrides, run_jobs, warm_start_job
from distrl_core.learner import LearnerConfig, WarmStartConfig


def job_settings(base: dict, condition: str, lag: int, keep: int) -> dict:
    """The learning-curve settings of one (condition, lag) run: its loop lag and max_policy_lag."""
    if condition == "replay":
        behaviour_lag, max_lag = 0, lag
    else:
        behaviour_lag, max_lag = lag, lag + keep
    return {**base, "behaviour_lag": behaviour_lag, "learner": {**base["learner"], "max_policy_lag": max_lag}}


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
        if {"aride", "decoupled_ppo"} <= set(methods):
            entry["decoupled_minus_aride"] = t_interval(
                [d - a for d, a in zip(finals["decoupled_ppo"], finals["aride"], strict=True)]
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
    parser.add_argument("--env-steps", type=int, default=8000)
    parser.add_argument("--episodes-per-round", type=int, default=32)
    parser.add_argument("--updates-per-round", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument(
        "--eval-tasks", type=int, default=None, help="first N held-out tasks only (smoke runs)"
    )
    parser.add_argument("--eval-episodes", type=int, default=2)
    parser.add_argument("--warm-start-updates", type=int, default=40)
    parser.add_argument("--warm-start-noise", type=float, default=0.3)
    parser.add_argument("--learner", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--warm", nargs="*", default=[], metavar="KEY=VALUE", help="WarmStartConfig overrides"
    )
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", default="bench/results/staleness.json")
    args = parser.parse_args(argv)
    if min(args.lags) < 1 or args.keep_versions < 0:
        parser.error("--lags must be >= 1 and --keep-versions >= 0")
    base = {
        **vars(args), "learner": parse_overrides(args.learner), "warm": parse_overrides(args.warm),
        "validation": False, "base": None, "train_eval_tasks": 0,
    }  # fmt: skip
    LearnerConfig(**base["learner"])  # a bad override fails now, not in every worker
    WarmStartConfig(**base["warm"])
    started = time.perf_counter()
    keys = [(f, c, k) for f in args.family for c in args.conditions for k in args.lags]
    with tempfile.TemporaryDirectory(prefix="staleness-") as tmp:
        directory = {(f, s): str(Path(tmp) / f"{f}-{s}") for f in args.family for s in args.seeds}
        warm = run_jobs(warm_start_job, [(f, s, base, directory[f, s]) for f, s in directory], args.jobs)
        jobs, tags = [], []
        for family, condition, lag in keys:
            settings = job_settings(base, condition, lag, args.keep_versions)
            for seed in args.seeds:
                for method in args.methods:
                    jobs.append((family, seed, method, settings, directory[family, seed]))
                    tags.append({"condition": condition, "lag": lag})
        runs = [{**r, **tag} for r, tag in zip(run_jobs(method_job, jobs, args.jobs), tags, strict=True)]
    summary = summarise(runs, keys, args.methods)
    document = {
        "benchmark": "staleness",
        "machine": {"platform": platform.platform(), "jobs": args.jobs},
        "settings": base,
        "wall_s": round(time.perf_counter() - started, 1),
        "summary": summary,
        "warm_starts": warm,
        "runs": runs,
    }
    out = write_result(args.out, document)
    for key, entry in summary.items():
        print(f"\n{key}: final held-out success, mean of the last 3 evaluations")
        for method in args.methods:
            print(f"  {method:14s} {fmt_interval(entry[method])}  per seed {entry[method]['per_seed']}")
        if "decoupled_minus_aride" in entry:
            print(f"  decoupled_ppo − aride (paired): {fmt_interval(entry['decoupled_minus_aride'])}")
    print(f"\nwrote {out} in {document['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
