"""Asynchronous collection (DistRL) vs the synchronous barrier (DigiRL), same wall-clock budget.

Runs `train_local` twice in this process, one mode after the other, from the same warm start with
the same seeds (so the same task stream and latency draws per collector): 16 collectors, one
SimDroid emulator each, with emulator-like heavy-tailed latency that really sleeps (so the 2 cores
are not the limit), the real policy acting, real shards, the DuckDB replay and the A-RIDE learner.

- Throughput: episodes (trajectories) and steps that started and finished inside the budget
  [t0, t0 + budget], t0 being when the learner's clock starts (after every collector opened), read
  back from the shards with SQL; per hour.
- Learner duty cycle: time inside updates (forward, backward, optimiser, priority write-back) over
  the learner's wall-clock since it opened (warm-up until the replay's minimum size included);
  `steady` leaves the warm-up out. Sampling, ingest, publishing and waiting count as idle.

    .venv/bin/python -m bench.async_vs_sync [--minutes 4] [--collectors 16] [--step-latency 0.5]
        [--task-sigma 1.0] [--updates-per-block 16] [--publish-every 16]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bench._common import (
    LATENCY_MODEL,
    add_pipeline_arguments,
    async_run_params,
    episodes_in_window,
    machine,
    percentile,
    prepare,
    print_table,
    pyplot,
    save_figure,
    steps_in_window,
    use_store,
    write_result,
)


def run_mode(sync: bool, args: argparse.Namespace, root: Path) -> dict:
    from flows.train_local import train_local

    use_store(root / ("sync" if sync else "async"))
    params = async_run_params(args, sync=sync, min_size_steps=args.min_size_steps)
    loadavg_before = machine()["loadavg_1_5_15"]
    started = time.monotonic()
    result = train_local(params, show_progress=False)
    wall = time.monotonic() - started
    t0 = float(result["rl_started_at"])
    t1 = t0 + 60 * args.minutes
    episodes = episodes_in_window(t0, t1)
    steps = steps_in_window(t0, t1)
    hours = (t1 - t0) / 3600
    durations = [e["duration_s"] for e in episodes]
    if sync:
        timing = result["learner"]
    else:
        # The last progress sample (<= 1 s before the learner closed); learn() reports its own too.
        timing = [h["learner_timing"] for h in result["history"] if h["learner_timing"]][-1] | {
            "duty_cycle_reported_by_learn": result["learner"]["duty_cycle"],
            "published": len(result["learner"]["published"]),
        }
    return {
        "mode": "sync" if sync else "async",
        "budget_s": t1 - t0,
        "run_wall_s": round(wall, 1),
        "episodes": len(episodes),
        "steps": steps,
        "episodes_per_hour": round(len(episodes) / hours, 1),
        "steps_per_hour": round(steps / hours, 1),
        "rounds": result.get("rounds"),
        "sync_collection_phases_s": result.get("learner_idle_s"),
        # Share of the collectors' time inside episodes (the rest: Prefect tasks, loading policies,
        # waiting at the barrier, CPU contention between episodes).
        "collector_time_in_episodes": round(sum(durations) / (args.collectors * (t1 - t0)), 3),
        "learner": {k: round(v, 4) if isinstance(v, float) else v for k, v in timing.items()},
        "episode_duration_s": {
            "p1": percentile(durations, 1),
            "p5": percentile(durations, 5),
            "p50": percentile(durations, 50),
            "p95": percentile(durations, 95),
            "p99": percentile(durations, 99),
            "p99_over_p1": (percentile(durations, 99) or 0) / max(1e-9, percentile(durations, 1) or 0),
            "min": min(durations, default=None),
            "max": max(durations, default=None),
        },
        "episode_lengths_mean": sum(e["length"] for e in episodes) / max(1, len(episodes)),
        "end_times_s": sorted(round(e["end_s"] - t0, 2) for e in episodes),
        "loadavg_before": loadavg_before,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_pipeline_arguments(parser, minutes=4.0, warm_start_updates=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--modes", nargs="+", default=["async", "sync"], choices=["async", "sync"])
    parser.add_argument("--root", default=".distrl/bench/async_vs_sync")
    parser.add_argument("--out", default="async_vs_sync")
    args = parser.parse_args()
    root = prepare(Path(args.root).resolve())
    started = time.monotonic()
    before = machine()
    modes = {mode: run_mode(mode == "sync", args, root) for mode in args.modes}
    document = {
        "benchmark": "async_vs_sync",
        "machine": before,
        "loadavg_after": machine()["loadavg_1_5_15"],
        "settings": vars(args) | {"envs_per_collector": 1, "episodes_per_batch": 1, "family": "general"},
        "latency_model": LATENCY_MODEL,
        "definitions": {
            "episodes": "trajectories that started and finished within [t0, t0 + budget]; t0 = the "
            "learner's clock start, after every collector opened",
            "duty_cycle": "learner time inside updates / learner wall-clock since it opened (warm-up "
            "before the replay's minimum size included)",
            "steady_duty_cycle": "the same from the first update on",
        },
        "modes": modes,
        "total_wall_s": round(time.monotonic() - started, 1),
    }
    if "async" in modes and "sync" in modes and modes["sync"]["episodes"]:
        a, s = modes["async"], modes["sync"]
        document["async_over_sync"] = {
            "episodes": round(a["episodes"] / s["episodes"], 2),
            "steps": round(a["steps"] / max(1, s["steps"]), 2),
        }
        document["targets"] = {
            "async_over_sync_episodes >= 3": document["async_over_sync"]["episodes"] >= 3,
            "async duty_cycle >= 0.95": a["learner"]["duty_cycle"] >= 0.95,
            "async steady_duty_cycle >= 0.95": a["learner"]["steady_duty_cycle"] >= 0.95,
        }
    rows = [
        [
            m["mode"],
            m["episodes"],
            f"{m['episodes_per_hour']:.0f}",
            f"{m['steps_per_hour']:.0f}",
            int(m["learner"]["updates"]),
            f"{m['learner']['duty_cycle']:.1%}",
            f"{m['learner']['steady_duty_cycle']:.1%}",
        ]
        for m in modes.values()
    ]
    document["table"] = print_table(
        ["mode", "episodes", "episodes/h", "steps/h", "updates", "duty cycle", "duty (steady)"], rows
    )
    path = write_result(args.out, document)
    plot(document, path.with_suffix(".png"))
    summary = {k: v for k, v in document.items() if k not in ("modes", "table")}
    summary["modes"] = {k: {x: y for x, y in v.items() if x != "end_times_s"} for k, v in modes.items()}
    import json

    print(json.dumps(summary, indent=2, default=str))
    print(f"wrote {path} and {path.with_suffix('.png')}")


def plot(document: dict, path: Path) -> None:
    plt = pyplot()
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 4.2), gridspec_kw={"width_ratios": [2, 1]})
    for mode, result in document["modes"].items():
        ends = result["end_times_s"]
        ax.step([e / 60 for e in ends], range(1, len(ends) + 1), where="post", label=mode)
    ax.set_xlabel("minutes since the learner's clock started")
    ax.set_ylabel("trajectories completed")
    ax.set_title(
        f"{document['settings']['collectors']} collectors, heavy-tailed emulator latency "
        f"(median {document['settings']['step_latency']} s/step)",
        fontsize=9,
    )
    ax.legend()
    modes = list(document["modes"])
    duty = [document["modes"][m]["learner"]["duty_cycle"] for m in modes]
    ax2.bar(modes, duty, color=["C0", "C1"][: len(modes)])
    ax2.axhline(0.95, color="grey", linestyle=":", label="target 95%")
    ax2.set_ylim(0, 1)
    ax2.set_ylabel("learner duty cycle")
    ax2.legend(loc="lower right", fontsize=8)
    save_figure(fig, path)


if __name__ == "__main__":
    main()
