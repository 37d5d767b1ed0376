"""Learning curves: A-RIDE vs DigiRL (filtered AWR) vs filtered BC, from one warm start, at equal
environment steps, on a SimDroid family; plus the learner's update time on batch 16.

Methods (``--methods``): ``aride`` (the default LearnerConfig: advantages normalised over the batch
and clamped to their positive part, a documented deviation from ARCHITECTURE §4), ``aride_pure``
(the §4 loss as written: signed, unnormalised Retrace advantages), ``aride_norm`` (normalised,
signed), ``aride_pos`` (unnormalised, positive part only), ``digirl`` and ``filtered_bc``.
``--learner KEY=VALUE`` overrides a LearnerConfig field for every method (tuning).

``--validation`` tunes without looking at the test split: the first phrasing template of each task
kind (``*-train-0``) is taken out of the train split, the warm start and RL use the rest, and the
"held-out" numbers are on those validation tasks.

Each method starts from the same warm-started policy (SFT on noisy scripted-expert demonstrations
of the train split), then runs rounds of: collect episodes on train tasks with the current policy
(sampling), add them to an in-memory replay, run learner updates, and evaluate greedily on the
held-out test split. Everything runs in this process on one CPU thread. Writes JSON and a PNG:

    .venv/bin/python bench/learning_curve.py [--family general] [--env-steps 6000] [--seed 0]
        [--methods aride aride_pure aride_norm aride_pos digirl filtered_bc]
        [--learner actor_lr=1e-3 ...] [--validation] [--out bench/results/learning_curve.json]
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch

from distrl_core.envs.simdroid.tasks import Task, load_tasks
from distrl_core.learner import (
    Learner,
    LearnerConfig,
    LoopConfig,
    StepBatch,
    WarmStartConfig,
    collect_demonstrations,
    evaluate_success,
    supervised_warm_start,
    train_rounds,
)
from distrl_core.policy import LoraSettings, Policy, PolicyConfig
from distrl_core.policy.defaults import describe_defaults
from distrl_core.rollout import RolloutConfig, run_episodes

# name -> (algorithm, LearnerConfig overrides)
METHODS: dict[str, tuple[str, dict]] = {
    "aride": ("aride", {}),
    "aride_pure": ("aride", {"normalize_advantages": False, "positive_advantages_only": False}),
    "aride_norm": ("aride", {"normalize_advantages": True, "positive_advantages_only": False}),
    "aride_pos": ("aride", {"normalize_advantages": False, "positive_advantages_only": True}),
    "digirl": ("digirl", {}),
    "filtered_bc": ("filtered_bc", {}),
}


def parse_overrides(items: list[str]) -> dict:
    """``["actor_lr=1e-3", "normalize_advantages=False"]`` -> {"actor_lr": 0.001, ...}."""
    overrides = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            overrides[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            overrides[key] = value
    return overrides


def validation_split(family: str) -> tuple[list[Task], list[Task]]:
    """(train, validation) from the train split: the ``*-train-0`` phrasing template of each task
    kind goes to validation, as the test split holds out phrasings (and parameters)."""
    train, validation = [], []
    for task in load_tasks(family, "train"):
        template = str(task.params.get("template", ""))
        held = template.endswith("-0") if template else hash(task.task_id) % 5 == 0
        (validation if held else train).append(task)
    return train, validation


def update_timing(policy: Policy, family: str, repeats: int = 10) -> dict[str, float]:
    """Seconds per learner update on 16 trajectories and on 16 single steps (median of repeats)."""
    tasks = load_tasks(family, "train")
    rows = run_episodes(policy, tasks[:: max(1, len(tasks) // 16)][:16], RolloutConfig(seed=1)).rows
    by_episode: dict[str, list[dict]] = {}
    for row in rows:
        by_episode.setdefault(row["episode_id"], []).append(row)
    episodes = list(by_episode.values())[:16]
    steps = [dict(r, episode_id=f"s{i}", step=0, done=True) for i, r in enumerate(rows[:16])]
    learner = Learner(copy.deepcopy(policy), LearnerConfig(critic_warmup_updates=0))
    timings = {}
    for name, batch_rows in (("16_trajectories", [r for e in episodes for r in e]), ("16_steps", steps)):
        batch = StepBatch.from_rows(batch_rows)
        learner.update(batch)  # warm the prompt cache and the allocator
        samples = []
        for _ in range(repeats):
            started = time.perf_counter()
            learner.update(batch)
            samples.append(time.perf_counter() - started)
        timings[f"update_s_{name}"] = round(sorted(samples)[len(samples) // 2], 4)
        timings[f"steps_in_{name}"] = batch.num_steps
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--family", default="general", choices=["general", "webshop"])
    parser.add_argument("--env-steps", type=int, default=8000, help="environment-step budget per method")
    parser.add_argument("--episodes-per-round", type=int, default=32)
    parser.add_argument("--updates-per-round", type=int, default=8)
    parser.add_argument("--warm-start-updates", type=int, default=40)
    parser.add_argument("--warm-start-noise", type=float, default=0.3)
    parser.add_argument(
        "--methods",
        nargs="+",
        default=["aride", "aride_pure", "aride_norm", "aride_pos", "digirl", "filtered_bc"],
        choices=sorted(METHODS),
    )
    parser.add_argument("--learner", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--validation", action="store_true", help="tune on a validation split of the train tasks"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--base", default=None, help="pretrained base folder (`distrl pretrained`), adapted with LoRA"
    )
    parser.add_argument("--out", default="bench/results/learning_curve.json")
    args = parser.parse_args()
    torch.set_num_threads(1)

    started = time.perf_counter()
    lora = LoraSettings() if args.base else None
    policy = Policy.create(PolicyConfig(base=args.base, lora=lora, device="cpu", seed=args.seed))
    print(f"policy: {describe_defaults(policy.config)}")
    warm = WarmStartConfig(
        family=args.family, noise=args.warm_start_noise, updates=args.warm_start_updates, seed=args.seed
    )
    overrides = parse_overrides(args.learner)
    train_tasks, test_tasks = (
        validation_split(args.family)
        if args.validation
        else (load_tasks(args.family, "train"), load_tasks(args.family, "test"))
    )
    demos = collect_demonstrations(warm, tasks=train_tasks)
    supervised_warm_start(policy, demos.rows, warm)
    warm_s = time.perf_counter() - started
    loop = LoopConfig(
        family=args.family,
        rounds=10_000,
        env_step_budget=args.env_steps,
        episodes_per_round=args.episodes_per_round,
        updates_per_round=args.updates_per_round,
        train_eval_tasks=66,
        seed=args.seed,
    )
    heldout_start = evaluate_success(policy, test_tasks, loop.env)
    print(f"warm start: held-out {heldout_start:.3f} after {warm_s:.0f} s", flush=True)

    results: dict[str, dict] = {}
    for method in args.methods:
        algorithm, method_overrides = METHODS[method]
        config = LearnerConfig(algorithm=algorithm, seed=args.seed, **{**method_overrides, **overrides})
        learner = Learner(copy.deepcopy(policy), config)
        method_started = time.perf_counter()

        def report(r, method=method):
            print(
                f"{method:12s} round {r.round:3d} env_steps {r.env_steps:6d} held-out {r.heldout_success:.3f}",
                flush=True,
            )

        rounds = train_rounds(learner, loop, report, train_tasks=train_tasks, test_tasks=test_tasks)
        heldout = [r.heldout_success for r in rounds]
        results[method] = {
            "rounds": [
                {
                    "round": r.round,
                    "env_steps": r.env_steps,
                    "episodes": r.episodes,
                    "heldout_success": round(r.heldout_success, 4),
                    "train_greedy_success": None
                    if r.train_greedy_success is None
                    else round(r.train_greedy_success, 4),
                    "collected_success": round(r.train_success, 4),
                    "updates": r.updates,
                    "seconds": round(r.seconds, 1),
                }
                for r in rounds
            ],
            "final_heldout": heldout[-1],
            "best_heldout": max(heldout),
            "mean_heldout_last_3": round(sum(heldout[-3:]) / len(heldout[-3:]), 4),
            "wall_s": round(time.perf_counter() - method_started, 1),
            "learner_config": {**method_overrides, **overrides},
        }

    document = {
        "benchmark": "learning_curve",
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "torch_threads": 1},
        "settings": {
            **vars(args),
            "policy": policy.config.to_dict(),
            "learner_defaults": LearnerConfig().to_dict(),
            "evaluated_on": "validation (train *-train-0 templates)" if args.validation else "test split",
        },
        "warm_start": {
            "heldout_success": heldout_start,
            "demo_episodes": len(demos.episodes),
            "seconds": round(warm_s, 1),
        },
        "update_timing": update_timing(policy, args.family),
        "methods": results,
    }
    if "aride" in results and "digirl" in results and results["digirl"]["mean_heldout_last_3"] > 0:
        document["aride_vs_digirl_relative"] = round(
            results["aride"]["mean_heldout_last_3"] / results["digirl"]["mean_heldout_last_3"] - 1, 4
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2))
    plot(document, out.with_suffix(".png"))
    print(json.dumps({k: v for k, v in document.items() if k not in ("methods", "settings")}, indent=2))
    print(
        json.dumps({m: {k: v for k, v in r.items() if k != "rounds"} for m, r in results.items()}, indent=2)
    )


def plot(document: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for method, result in document["methods"].items():
        xs = [r["env_steps"] for r in result["rounds"]]
        ys = [r["heldout_success"] for r in result["rounds"]]
        ax.plot(xs, ys, marker="o", markersize=3, label=method)
    ax.axhline(document["warm_start"]["heldout_success"], color="grey", linestyle=":", label="warm start")
    ax.set_xlabel("environment steps")
    ax.set_ylabel(f"success on {document['settings']['evaluated_on']} (greedy)")
    ax.set_ylim(0, 1)
    ax.set_title(f"SimDroid {document['settings']['family']}: held-out success vs experience")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
