"""Where the demo's learner spends its wall-clock: `distrl demo` run in this process with its
threads' stacks sampled (`bench.stack_sampler`) during the RL phase.

The learner makes ~290 MiniLM updates in the demo's 6 minutes (1.2 s each) where the roofline times
one at 0.36 s alone. Every thread of the demo shares one interpreter and two cores, so this reports,
per group of threads (the learner's flow, the collectors, the replay's prefetch and ingest threads),
how much CPU it got against its wall-clock, and which functions its stacks were in: a share of
wall-clock, whether the thread was computing or waiting for the GIL or a core (CPU / wall says which).
The evaluator runs in a child process and is not sampled; the warm start is left out (only threads
inside the RL phase are counted).

    .venv/bin/python -m bench.demo_profile [--interval 0.05] [--out demo_profile] -- <distrl demo options>

e.g. `python -m bench.demo_profile --out demo_profile_minilm -- --pretrained --seed 0 --validation
--validation-split validation_unseen`. Writes bench/results/<out>.json (the demo's own summary,
its learner counters and the profile). The demo writes to .distrl/demo, as `distrl demo` does.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench._common import machine, write_result
from bench.stack_sampler import StackSampler

LEARN_FLOW = "flows/learn.py:learn"
GROUPS = ("learner", "collectors", "replay-prefetch", "replay-ingest")


def rl_group(thread_name: str, stack: set[str]) -> str | None:
    """The demo's RL-phase threads by role; None for the rest (the warm start, Prefect's loops)."""
    if LEARN_FLOW in stack:
        return "learner"
    if thread_name.startswith("collector-"):
        return "collectors"
    for prefix in ("replay-prefetch", "replay-ingest"):
        if thread_name.startswith(prefix):
            return prefix
    return None


# Frames every sample of a group passes through (thread start-up, Prefect's engine, this bench):
# on 100 % of the stacks, they say nothing about where the time goes.
PLUMBING = ("<frozen ", ".11/threading.py", ".11/concurrent/", "prefect/", "bench/demo_profile.py", "ops/cli")


def informative(shares: dict[str, float], top: int) -> dict[str, float]:
    """The ``top`` functions by share, the plumbing left out."""
    kept = {k: v for k, v in shares.items() if not k.startswith(PLUMBING)}
    return dict(list(kept.items())[:top])


def profile_table(profile: dict, top: int = 20) -> dict[str, dict]:
    """Per group: wall-clock sampled (thread-seconds), CPU seconds, CPU / wall, and the ``top``
    functions by inclusive share of its samples."""
    out = {}
    for group in GROUPS:
        entry = profile[group]
        thread_wall = entry["thread_samples"] * profile["interval_s"]
        out[group] = {
            "thread_seconds_sampled": round(thread_wall, 1),
            "cpu_s": entry["cpu_s"],
            "cpu_per_wall": round(entry["cpu_s"] / thread_wall, 3) if thread_wall else None,
            "inclusive_top": informative(entry["inclusive"], top),
            "exclusive_top": informative(entry["exclusive"], top),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between stack samples")
    parser.add_argument("--out", default="demo_profile", help="bench/results/<out>.json")
    parser.add_argument("demo", nargs=argparse.REMAINDER, help="after --: the options of `distrl demo`")
    args = parser.parse_args(argv)
    demo_argv = [a for a in args.demo if a != "--"]

    from ops.cli import main as distrl

    sampler = StackSampler(args.interval, group_of=rl_group).start()
    started = time.monotonic()
    code = distrl(["demo", *demo_argv])
    sampler.stop()
    if code != 0:
        raise SystemExit(f"distrl demo {' '.join(demo_argv)} exited with {code}: no profile written")
    profile = sampler.summary(top=100, groups=GROUPS)
    summary = json.loads(Path(".distrl/demo/summary.json").read_text())
    rl_wall = 60 * summary["minutes_rl"]
    learner = summary.get("learner") or {}
    result = {
        "benchmark": "demo_profile",
        "command": "python -m bench.demo_profile --out " + args.out + " -- " + " ".join(demo_argv),
        "machine": machine(),
        "interval_s": args.interval,
        "process_wall_s": round(time.monotonic() - started, 1),
        "rl_wall_s": rl_wall,
        "learner_updates": learner.get("updates"),
        "learner_s_per_update": round(rl_wall / learner["updates"], 3) if learner.get("updates") else None,
        "learner_duty_cycle": learner.get("duty_cycle"),
        "heldout_success_final": summary["heldout_success_final"],
        "groups": profile_table(profile),
        "profile": profile,
    }
    path = write_result(args.out, result)
    for group, row in result["groups"].items():
        print(
            f"{group:16} thread-s {row['thread_seconds_sampled']:7.1f}  cpu-s {row['cpu_s']:7.1f}  cpu/wall {row['cpu_per_wall']}"
        )
        for key, share in row["inclusive_top"].items():
            print(f"    {share:6.3f}  {key}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
