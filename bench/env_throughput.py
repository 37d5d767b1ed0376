"""SimDroid environment throughput on one core, driven by the noiseless scripted expert.

Prints JSON: steps/s without screenshots (text observations: compact tree + XML) and with
screenshots at the default size, plus what was measured. The expert's own time is included, as a
policy's would be. Run: ``python -m bench.env_throughput [--seconds 5] [--cpu 0]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from simulators.simdroid import load_tasks
from simulators.simdroid.expert import expert_action


def measure(screenshots: bool, seconds: float) -> dict[str, float | int]:
    env = SimDroidEnv(SimDroidEnvConfig(screenshots=screenshots))
    tasks = load_tasks(split="train")
    steps = episodes = successes = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        task = tasks[episodes % len(tasks)]
        env.reset(task, seed=episodes)
        done = False
        while not done:
            result = env.step(expert_action(env, task))
            done = result.done
            steps += 1
        successes += result.info.success
        episodes += 1
    elapsed = time.perf_counter() - started
    return {
        "steps_per_s": round(steps / elapsed, 1),
        "steps": steps,
        "episodes": episodes,
        "success_rate": round(successes / episodes, 3),
        "seconds": round(elapsed, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measuring time per mode")
    parser.add_argument("--cpu", type=int, default=None, help="pin to this CPU core (Linux)")
    args = parser.parse_args()
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    measure(False, 0.5)  # warm caches (fonts, task tables) outside the measurement
    config = SimDroidEnvConfig().device
    result = {
        "bench": "env_throughput",
        "without_screenshots": measure(False, args.seconds),
        "with_screenshots": measure(True, args.seconds),
        "screenshot_size": [
            int(config.width * config.screenshot_scale),
            int(config.height * config.screenshot_scale),
        ],
        "distractor_prob": config.distractor_prob,
        "cpu_affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": platform.python_version(),
        "targets_steps_per_s": {"without_screenshots": 1000, "with_screenshots": 100},
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
