"""Learner updates per second on one process and on two (DDP over gloo, CPU), side by side.

    python -m bench.learner_ddp                 # ~1-2 min on 2 cores; bench/results/learner_ddp.json

The same union batches of real SimDroid episodes (a fresh tiny policy plays them) feed two
learners: one process with one torch thread, and two processes of one thread each, rank 0 in this process and a follower it starts (`tasks/learner_ranks.py`: the
draw travels through rank 0's store, DDP all-reduces the gradients), i.e. the path `learn` takes
with learner_processes=2. Only the updates are timed: not the rollouts, not the launch.
Two cores bound the gain at 2x, and only on otherwise idle cores (a 2-thread single process on
a loaded machine ran 30x slower than one thread, so it is not a baseline here); the point is
correctness and the path to one GPU per rank, the figure the cost of the shard/all-reduce path.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench._common import RESULTS, machine

CONFIG: dict[str, Any] = {
    "micro_batch_size": 8,
    "critic_warmup_updates": 0,
    "entity_dropout": 0.0,
    "word_dropout": 0.0,
}


def _batches(count: int, batch_size: int) -> list[Any]:
    """`count` union batches of `batch_size` real episodes (step dicts tagged with sample_idx)."""
    import numpy as np

    from distrl_core.learner.learner import Draw
    from distrl_core.policy import Policy, PolicyConfig
    from simulators.rollout import RolloutConfig, run_episodes
    from simulators.sim_env import SimDroidEnvConfig

    policy = Policy.create(PolicyConfig(device="cpu"))
    tasks = [f"general-train-{i:04d}" for i in range(batch_size)]
    config = RolloutConfig(env=SimDroidEnvConfig(screenshots=False, ui_xml=False), parallel_envs=8, seed=1)
    rows = run_episodes(policy, tasks, config).rows
    episodes = sorted({r["episode_id"] for r in rows})
    rng = np.random.default_rng(0)
    draws = []
    for _ in range(count):
        picked = rng.choice(len(episodes), batch_size)  # with replacement, as the replay draws
        batch = [
            r | {"sample_idx": i}
            for i, e in enumerate(picked)
            for r in rows
            if r["episode_id"] == episodes[e]
        ]
        draws.append(Draw(picked, batch, rng.uniform(0.5, 1.0, batch_size)))
    return draws


def _given(draw: Any) -> Any:
    return draw


def _run(draws: list[Any], threads: int, processes: int, warmup: int) -> dict[str, Any]:
    import torch

    from distrl_core.learner import Learner, LearnerConfig
    from distrl_core.learner.learner import train_step
    from distrl_core.policy import Policy, PolicyConfig
    from tasks.learner_ranks import LearnerRanks

    torch.set_num_threads(threads)
    learner = Learner(Policy.create(PolicyConfig(device="cpu")), LearnerConfig(**CONFIG))
    ranks = LearnerRanks.start(learner, processes) if processes > 1 else None
    try:
        timed, steps = 0.0, 0
        for n, draw in enumerate(draws):
            sample: Callable[[], Any] = partial(_given, draw)
            started = time.perf_counter()
            if ranks is None:
                step = train_step(learner, sample, lambda _k, _p: None)
            else:
                step = ranks.train_step(sample, lambda _k, _p: None)
            if n >= warmup:
                timed += time.perf_counter() - started
                steps += step.steps
    finally:
        if ranks is not None:
            ranks.close()
    updates = len(draws) - warmup
    trajectories = updates * len(draws[0].slots)
    return {
        "processes": processes,
        "torch_threads_per_process": threads,
        "updates": updates,
        "seconds": round(timed, 3),
        "updates_per_s": round(updates / timed, 3),
        "trajectories_per_s": round(trajectories / timed, 2),
        "steps_per_s": round(steps / timed, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--updates", type=int, default=8, help="timed updates per configuration")
    parser.add_argument(
        "--batch-size", type=int, default=16, help="trajectories per update (the union batch)"
    )
    parser.add_argument("--out", default=str(RESULTS / "learner_ddp.json"))
    args = parser.parse_args()
    os.environ["DISTRL_LEARNER_THREADS"] = "1"  # the follower's torch threads (configure_threads)
    warmup = 2
    draws = _batches(args.updates + warmup, args.batch_size)
    runs = [_run(draws, threads, processes, warmup) for threads, processes in ((1, 1), (1, 2))]
    out = {
        "bench": "learner_ddp",
        "what": "learner updates on the same union batches: 1 process vs 2 "
        "processes (DDP, gloo, 1 thread each; rank 0 here, a follower it starts); updates only are timed",
        "batch_size": args.batch_size,
        "config": CONFIG,
        "runs": runs,
        "note": "2 CPU cores shared with other work (see loadavg): 2 processes gain at most 2x, and only on "
        "idle cores; the point is correctness and the path to one GPU per rank",
        "machine": machine() | {"torch_threads": "per run"},
    }
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
