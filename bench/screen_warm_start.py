"""The warm start alone on the screen observation: SFT on screen-observed demonstrations
(``WarmStartConfig.observation="screen"``) against SFT on the tree's, both evaluated greedily on
the screen (and the tree's on the tree, for reference), as the demo's evaluator scores a warm start.

    python -m bench.screen_warm_start --seed 0 --updates 300 --out screen_warm_start

Writes ``bench/results/<out>.json``: per arm the demonstrations (episodes, expert success, steps,
CPU seconds), the SFT's first and last loss, and the held-out success (General test, 3 episodes
per task, the held-out seed) overall and per task kind.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from distrl_core.envs.screen import ObservationKind
from distrl_core.policy.config import policy_config_for
from distrl_core.policy.model import Policy
from simulators.evaluation import HELDOUT_SEED, estimate_success
from simulators.rollout import RolloutConfig
from simulators.simdroid.tasks import get_task, load_tasks
from simulators.warm_start import WarmStartConfig, collect_demonstrations, supervised_warm_start

RESULTS = Path(__file__).parent / "results"


def _per_kind(per_task: dict[str, float]) -> dict[str, float]:
    kinds: dict[str, list[float]] = {}
    for task_id, success in per_task.items():
        kinds.setdefault(get_task(task_id).kind, []).append(success)
    return {kind: round(sum(v) / len(v), 3) for kind, v in sorted(kinds.items())}


def _evaluate(policy: Policy, observation: ObservationKind, episodes: int) -> dict[str, Any]:
    env = dataclasses.replace(RolloutConfig().env, observation=observation)
    started = time.process_time()
    estimate = estimate_success(
        policy, load_tasks("general", "test"), env, episodes_per_task=episodes, seed=HELDOUT_SEED
    )
    return {
        "success": round(estimate.success, 3),
        "ci": [round(x, 3) for x in estimate.interval],
        "episodes": estimate.episodes,
        "per_kind": _per_kind(estimate.per_task),
        "cpu_s": round(time.process_time() - started, 1),
    }


def warm_start(
    observation: ObservationKind, seed: int, updates: int, base: str | None
) -> tuple[Policy, dict[str, Any]]:
    config = WarmStartConfig(seed=seed, updates=updates, observation=observation)
    started = time.process_time()
    demos = collect_demonstrations(config)
    collected = time.process_time() - started
    policy = Policy.create(policy_config_for(base, seed, "train"))
    history = supervised_warm_start(policy, demos.rows, config)
    return policy, {
        "demo_episodes": len(demos.episodes),
        "demo_success": round(demos.success_rate, 3),
        "demo_steps": demos.num_steps,
        "demo_cpu_s": round(collected, 1),
        "sft_cpu_s": round(time.process_time() - started - collected, 1),
        "nll_first_last": [round(history[0]["nll"], 3), round(history[-1]["nll"], 3)] if history else [],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--updates", type=int, default=300)
    parser.add_argument("--base", default="tiny-minilm")
    parser.add_argument("--episodes", type=int, default=3, help="greedy episodes per test task")
    parser.add_argument("--out", default="screen_warm_start")
    args = parser.parse_args()
    report: dict[str, Any] = {"seed": args.seed, "updates": args.updates, "base": args.base}
    kinds: tuple[ObservationKind, ...] = ("screen", "tree")
    for observation in kinds:
        policy, arm = warm_start(observation, args.seed, args.updates, args.base)
        arm["on_screen"] = _evaluate(policy, "screen", args.episodes)
        if observation == "tree":
            arm["on_tree"] = _evaluate(policy, "tree", args.episodes)
        report[f"{observation}_warm_start"] = arm
        print(json.dumps({observation: arm}), flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
