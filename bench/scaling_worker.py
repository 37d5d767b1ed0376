"""One worker process of `bench.scaling`: a share of the collectors, as `collect` flow runs in threads.

A deployment runs collectors on several workers, each its own Python process; this stands in for
one of them. It talks to the Prefect API server whose address the coordinator put in
`PREFECT_API_URL`, writes to the coordinator's store and registry, and reports what the
coordinator measures through a small JSON status file rewritten every half second: how many of
its collectors are acting (open, with a policy version loaded), their sampled emulator seconds so
far and its own CPU seconds. It stops its collectors when the coordinator creates the stop file,
and samples their stacks (`bench.stack_sampler`) while the coordinator's profile file exists (the
measuring window).

    python -m bench.scaling_worker --root R --first 0 --count 64 --config 128 --status S --stop F ...
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from pathlib import Path

STATUS_EVERY_S = 0.5


def write_status(path: Path, status: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(status))
    tmp.replace(path)  # the coordinator never reads half a file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="the coordinator's bench folder")
    parser.add_argument("--config", type=int, required=True, help="collectors in the whole configuration")
    parser.add_argument("--first", type=int, required=True, help="index of this worker's first collector")
    parser.add_argument("--count", type=int, required=True, help="collectors in this worker")
    parser.add_argument("--step-latency", type=float, required=True)
    parser.add_argument("--task-sigma", type=float, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--screenshots", action="store_true", help="store a PNG per step in the shards")
    parser.add_argument("--status", required=True)
    parser.add_argument("--stop", required=True)
    parser.add_argument(
        "--profile", help="sample the collectors' stacks while this file exists; summary beside it"
    )
    args = parser.parse_args()

    from bench._common import prepare, use_store

    root = prepare(Path(args.root), fresh=False)
    use_store(root)
    from bench.scaling import emulator_seconds
    from bench.stack_sampler import StackSampler
    from flows.train_local import _collector_thread
    from tasks.collector import CollectorParams, CollectorSession
    from tasks.stop import StopToken

    stop = StopToken()
    n = args.config
    threads = [
        threading.Thread(
            target=_collector_thread,  # started again if the API refuses the flow run
            args=(
                CollectorParams(
                    pool="bench",
                    collector_id=f"n{n}_c{i}",
                    num_envs=1,
                    episodes_per_batch=1,
                    family="general",
                    flush_episodes=4,
                    flush_seconds=10,
                    step_latency_s=args.step_latency,
                    task_latency_sigma=args.task_sigma,
                    screenshots=args.screenshots,
                    # Episode ids derive from the seed: distinct per configuration in the one store.
                    seed=args.seed * 1_000_000 + n * 1000 + i,
                ),
                stop,
                {},
            ),
            name=f"collector-{i}",
            daemon=True,
        )
        for i in range(args.first, args.first + args.count)
    ]
    status_path, stop_path = Path(args.status), Path(args.stop)

    def report(final: bool = False) -> None:
        write_status(
            status_path,
            {
                "pid": os.getpid(),
                "time": time.time(),
                # Acting: open and holding a policy version (the first load in a process imports
                # transformers, seconds on a loaded machine: startup, not collection).
                "open": sum(s.version is not None for s in stop.open_sessions(CollectorSession)),
                "emulator_s": emulator_seconds(stop),
                "cpu_s": time.process_time(),
                "final": final,
            },
        )

    for thread in threads:
        thread.start()
        time.sleep(0.2)  # as train_local: no burst of flow-run creations on the API
        report()
    sampler = None

    def write_profile() -> None:
        assert sampler is not None
        sampler.stop()
        Path(f"{args.status}.profile.json").write_text(json.dumps(sampler.summary(), indent=1))

    while not stop_path.exists():
        report()
        if args.profile and sampler is None and Path(args.profile).exists():
            sampler = StackSampler(tags={"mlflow": "mlflow/"}).start()
        if sampler is not None and not Path(args.profile).exists():
            write_profile()
            sampler, args.profile = None, None
        time.sleep(STATUS_EVERY_S)
    if sampler is not None:  # the window ended and the stop came between two looks
        write_profile()
    stop.set()
    for thread in threads:
        thread.join()
    stop.close()
    report(final=True)


if __name__ == "__main__":
    main()
