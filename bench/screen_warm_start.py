"""The warm start alone on the screen observation: SFT on screen-observed demonstrations
(``WarmStartConfig.observation="screen"``) against SFT on the tree's, both evaluated greedily on
the screen (and the tree's on the tree, for reference), as the demo's evaluator scores a warm start.

    python -m bench.screen_warm_start --seed 0 --updates 300 --out screen_warm_start
    python -m bench.screen_warm_start --seeds 0 1 2 --split validation_unseen --paraphrase 0.8 \
        --own-only --out screen_warm_start_validation_unseen

``--split`` picks the held-out tasks; the demonstrations come from the tasks trained beside them
(``TRAINED_BESIDE``: test -> train, validation_unseen -> fit_unseen), so a validation run never
sees the test split. ``--own-only`` evaluates each arm on its own observation alone (the screen's
warm start on the screen, the tree's on the tree): the pair the demo compares.

Writes ``bench/results/<out>.json``: per seed and arm the demonstrations (episodes, expert success,
steps, CPU seconds), the SFT's CPU seconds and first and last loss, and the held-out success (3
episodes per task, the held-out seed) overall and per task kind; with several seeds, each arm's
mean and 95 % t-interval over them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from bench._stats import t_interval
from distrl_core.envs.screen import ObservationKind
from distrl_core.policy.candidates import build_candidates, find_candidate
from distrl_core.policy.config import policy_config_for
from distrl_core.policy.model import Policy
from distrl_core.policy.version import save_policy
from simulators.evaluation import HELDOUT_SEED, estimate_success
from simulators.rollout import RolloutConfig
from simulators.simdroid.tasks import TRAINED_BESIDE, get_task, load_tasks
from simulators.warm_start import WarmStartConfig, collect_demonstrations, supervised_warm_start

RESULTS = Path(__file__).parent / "results"
SPLITS = ("test", "validation_unseen", "validation_words", "validation")


def _per_kind(per_task: dict[str, float]) -> dict[str, float]:
    kinds: dict[str, list[float]] = {}
    for task_id, success in per_task.items():
        kinds.setdefault(get_task(task_id).kind, []).append(success)
    return {kind: round(sum(v) / len(v), 3) for kind, v in sorted(kinds.items())}


def _demo_per_kind(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per task kind: the demonstrations' success and the share of their steps whose action no
    candidate of the step's own observation expresses (what SFT has to skip: an invalid or
    mis-grounded expert step)."""
    episodes: dict[str, dict[str, bool]] = {}
    unmatched: dict[str, list[bool]] = {}
    for row in rows:
        kind = get_task(row["task_id"]).kind
        episodes.setdefault(kind, {})[row["episode_id"]] = bool(row["episode_success"])
        candidates = build_candidates(row["instruction"], row["observation_text"])
        unmatched.setdefault(kind, []).append(find_candidate(candidates, row["action"]) is None)
    return {
        kind: {
            "success": round(statistics.fmean(episodes[kind].values()), 3),
            "unmatched_steps": round(statistics.fmean(unmatched[kind]), 3),
            "steps": len(unmatched[kind]),
        }
        for kind in sorted(episodes)
    }


def _evaluate(policy: Policy, observation: ObservationKind, episodes: int, split: str) -> dict[str, Any]:
    env = dataclasses.replace(RolloutConfig().env, observation=observation)
    started = time.process_time()
    estimate = estimate_success(
        policy, load_tasks("general", split), env, episodes_per_task=episodes, seed=HELDOUT_SEED
    )
    return {
        "success": round(estimate.success, 3),
        "ci": [round(x, 3) for x in estimate.interval],
        "episodes": estimate.episodes,
        "per_kind": _per_kind(estimate.per_task),
        "cpu_s": round(time.process_time() - started, 1),
    }


def warm_start(
    observation: ObservationKind,
    seed: int,
    updates: int,
    base: str | None,
    split: str = "test",
    paraphrase: float = 0.0,
    keep: str | None = None,
) -> tuple[Policy, dict[str, Any]]:
    trained = TRAINED_BESIDE[split]
    config = WarmStartConfig(
        seed=seed, updates=updates, observation=observation, split=trained, paraphrase=paraphrase
    )
    started = time.process_time()
    demos = collect_demonstrations(config)
    collected = time.process_time() - started
    policy = Policy.create(policy_config_for(base, seed, trained))  # type: ignore[arg-type]
    history = supervised_warm_start(policy, demos.rows, config)
    if keep:  # for a later look at its choices (the expert's steps it agrees with)
        save_policy(policy, Path(keep) / f"{observation}-{seed}")
    return policy, {
        "demo_episodes": len(demos.episodes),
        "demo_success": round(demos.success_rate, 3),
        "demo_steps": demos.num_steps,
        "demo_per_kind": _demo_per_kind(demos.rows),
        "demo_cpu_s": round(collected, 1),
        "sft_cpu_s": round(time.process_time() - started - collected, 1),
        "nll_first_last": [round(history[0]["nll"], 3), round(history[-1]["nll"], 3)] if history else [],
    }


def _summary(report: dict[str, Any], seeds: list[int], observation: str) -> dict[str, Any]:
    """An arm's held-out success over the seeds (mean, 95 % t-interval) and its per-kind means."""
    scores = [report[f"seed{s}_{observation}_warm_start"][f"on_{observation}"] for s in seeds]
    kinds = sorted({kind for score in scores for kind in score["per_kind"]})
    per_kind = {k: round(statistics.fmean(sc["per_kind"][k] for sc in scores), 3) for k in kinds}
    return {**t_interval([sc["success"] for sc in scores]), "per_kind": per_kind}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, nargs="+", help="several seeds (overrides --seed)")
    parser.add_argument("--updates", type=int, default=300)
    parser.add_argument("--base", default="tiny-minilm")
    parser.add_argument("--episodes", type=int, default=3, help="greedy episodes per held-out task")
    parser.add_argument("--split", default="test", choices=SPLITS, help="the held-out tasks")
    parser.add_argument("--paraphrase", type=float, default=0.0, help="as WarmStartConfig.paraphrase")
    parser.add_argument("--observations", nargs="+", default=["screen", "tree"], choices=["screen", "tree"])
    parser.add_argument("--own-only", action="store_true", help="each arm on its own observation only")
    parser.add_argument("--keep", help="save each warm start in KEEP/<observation>-<seed>")
    parser.add_argument("--out", default="screen_warm_start")
    args = parser.parse_args()
    torch.set_num_threads(1)  # process CPU seconds count every thread's spinning too
    seeds = args.seeds or [args.seed]
    report: dict[str, Any] = {
        "seeds": seeds,
        "updates": args.updates,
        "base": args.base,
        "split": args.split,
        "trained_on": TRAINED_BESIDE[args.split],
        "paraphrase": args.paraphrase,
        "episodes_per_task": args.episodes,
    }
    for seed in seeds:
        for observation in args.observations:
            policy, arm = warm_start(
                observation, seed, args.updates, args.base, args.split, args.paraphrase, args.keep
            )
            own = _evaluate(policy, observation, args.episodes, args.split)
            if args.own_only:
                arm[f"on_{observation}"] = own
            else:
                arm["on_screen"] = (
                    own if observation == "screen" else _evaluate(policy, "screen", args.episodes, args.split)
                )
                if observation == "tree":
                    arm["on_tree"] = own
            key = f"{observation}_warm_start" if len(seeds) == 1 else f"seed{seed}_{observation}_warm_start"
            report[key] = arm
            print(json.dumps({"seed": seed, observation: arm}), flush=True)
    if len(seeds) > 1:
        report["summary"] = {obs: _summary(report, seeds, obs) for obs in args.observations}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
