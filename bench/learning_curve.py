"""Learning curves over seeds: A-RIDE vs its loss as written vs DigiRL (filtered AWR) vs filtered BC vs the
critic-free group baseline (GiGPO-style), at equal environment steps, on General and Web Shopping.

Per (family, seed): one warm start (SFT on noisy scripted-expert demonstrations of the train split),
saved and shared by every method. Per (family, seed, method): rounds of collect episodes on train
tasks with the current policy (sampling) → in-memory replay → learner updates → greedy evaluation
on the held-out test split (``simulators.local_loop.train_rounds``), until ``--env-steps`` steps.

A method's score for a seed is its final held-out success: the mean of its last 3 evaluations.
Printed per method and family: the mean over seeds with its 95 % t-interval, and the relative gain
of A-RIDE over DigiRL-AWR (ratio of the means − 1; plus the paired per-seed difference with its
interval). Writes JSON and a PNG (mean curve with its 95 % band per method, one panel per family).

Methods (``--methods``): ``aride`` (the default LearnerConfig: advantages normalised over the batch
and clamped to their positive part, a documented deviation: docs/architecture.md, "The learner's
loss"), ``aride_pure`` (the loss as written: signed, unnormalised Retrace advantages),
``aride_norm``, ``aride_pos`` (one of the two changes each), ``digirl``, ``filtered_bc`` and ``gigpo`` (episode groups of ``--group-size``
episodes of one task under one env seed; LoopConfig.group_size). MobileRL-style options on A-RIDE's
defaults: ``aride_posreplay``, ``aride_curriculum``, ``aride_shortest``, all three ``aride_mobilerl``,
and ``adagrpo`` (gigpo's group advantages plus the three); ``decoupled_ppo`` (AReaL; ``_signed``: its
advantages as written, ``_avg``: the published average as π_prox, ``_raw``: raw weights published; ``_retrace`` and
``_returns``: its advantage estimator named, Retrace's (the default) or G_t − V(s_t)). ``--learner KEY=VALUE`` overrides
a LearnerConfig field for every method (tuning), ``--warm KEY=VALUE`` a WarmStartConfig field. ``--validation`` tunes without the test split:
the ``*-train-0`` phrasing template of each task kind is held out of the train split and used as
the "held-out" set; ``--validation-words`` / ``--validation-unseen`` pick the selections that also hold
out words, or a template and a parameter per task (simulators.simdroid.tasks). ``--base minilm
--encoder-layers K`` trains the encoder's top K layers (0: the heads alone); ``--encoder-candidates spans``
reads each candidate in place in the encoded screen instead of encoding its text alone.

``--jobs N`` runs the warm starts, then the (family, seed, method) runs, in N worker processes with
one torch thread each (results do not depend on N). Only torch, transformers, numpy, pyarrow and
pydantic are imported (no DuckDB, Prefect or MLflow), so it runs on a bare compute machine:

    .venv/bin/python -m bench.learning_curve [--family general webshop] [--seeds 0 1 2]
        [--env-steps 8000] [--methods aride aride_pure digirl filtered_bc gigpo] [--jobs 1]
        [--learner actor_lr=1e-3 ...] [--warm phrasing_dropout=0.3 ...] [--validation [--validation-unseen]] [--eval-episodes 2]
        [--base MODEL_DIR [--encoder-layers 1] [--encoder-candidates pooled|spans]]
        [--out bench/results/learning_curve.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "1")  # one thread per worker: N workers on N cores
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import torch

from bench._curve_settings import CurveSettings, add_curve_arguments, curve_settings
from bench._stats import fmt_interval, t_interval
from distrl_core.envs.protocol import Task
from distrl_core.learner import Learner, LearnerConfig
from distrl_core.learner.config import Algorithm
from distrl_core.policy import Policy, load_policy, save_policy
from simulators.local_loop import LoopConfig, evaluate_success, train_rounds
from simulators.simdroid.tasks import load_tasks
from simulators.warm_start import WarmStartConfig, collect_demonstrations, supervised_warm_start

MOBILERL = {"positive_replay_strength": 2.0, "failure_curriculum_attempts": 6, "shortest_path_exponent": 1.0}
# name -> (algorithm, LearnerConfig overrides)
METHODS: dict[str, tuple[Algorithm, dict]] = {
    "aride": ("aride", {}),
    "aride_pure": ("aride", {"normalize_advantages": False, "positive_advantages_only": False}),
    "aride_norm": ("aride", {"normalize_advantages": True, "positive_advantages_only": False}),
    "aride_pos": ("aride", {"normalize_advantages": False, "positive_advantages_only": True}),
    "aride_raw": ("aride", {"weight_average_decay": 0.0}),  # publishes raw weights, not their average
    "digirl": ("digirl", {}),
    "filtered_bc": ("filtered_bc", {}),
    "gigpo": ("gigpo", {}),
    # MobileRL-style options (docs/architecture.md), one at a time on A-RIDE's defaults, all three
    # together, and AdaGRPO: the group baseline (GRPO-style group advantages) with all three.
    "aride_posreplay": ("aride", {"positive_replay_strength": 2.0}),
    "aride_curriculum": ("aride", {"failure_curriculum_attempts": 6}),
    "aride_shortest": ("aride", {"shortest_path_exponent": 1.0}),
    "aride_mobilerl": ("aride", MOBILERL),
    "adagrpo": ("gigpo", MOBILERL),
    # AReaL's staleness-aware PPO (bench/staleness.py), with A-RIDE's positive-part advantages;
    # as written (signed advantages); and with the published average as the proximal policy.
    "decoupled_ppo": ("decoupled_ppo", {}),
    "decoupled_ppo_signed": ("decoupled_ppo", {"positive_advantages_only": False}),
    "decoupled_ppo_avg": ("decoupled_ppo", {"proximal_policy": "average"}),
    # Raw weights published, so μ is a past version of the weights trained, as in AReaL.
    "decoupled_ppo_raw": ("decoupled_ppo", {"weight_average_decay": 0.0}),
    # Its estimator named either way: Retrace's advantages with DPER priorities (the default), or
    # AReaL's G_t − V(s_t) with uniform priorities.
    "decoupled_ppo_retrace": ("decoupled_ppo", {"decoupled_retrace": True}),
    "decoupled_ppo_returns": ("decoupled_ppo", {"decoupled_retrace": False}),
}
DEFAULT_METHODS = ["aride", "aride_pure", "digirl", "filtered_bc", "gigpo"]
LAST_K = 3  # a run's score: the mean of its last LAST_K held-out evaluations
# Learner metrics kept per round (means over the round's updates), to tell why a method stalls.
ROUND_METRICS = (
    "actor_loss", "entropy", "advantage_mean", "rho_mean", "kept_fraction", "clip_fraction",
    "group_singleton_step_fraction", "group_episode_advantage_abs_mean", "grad_norm_actor",
    "priority_multiplier_mean", "behaviour_weight_mean", "used_step_fraction", "policy_lag_mean",
)  # fmt: skip


EVALUATED_ON = {  # CurveSettings.heldout_split -> what the result file says it is
    "test": "test split",
    "validation": "validation (train *-train-0 templates)",
    "validation_words": "validation_words (train templates with words no fit template has)",
    "validation_unseen": "validation_unseen (a held-out template and parameter per task)",
}


def evaluate(policy, tasks: list[Task], episodes_per_task: int) -> float:
    """The bench's evaluation of a policy outside the rounds (the warm start): greedy success."""
    return evaluate_success(policy, tasks, LoopConfig().env, episodes_per_task=episodes_per_task)


def _quiet_worker() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one "Loading weights" bar per policy load otherwise
    torch.set_num_threads(1)


def warm_start_job(family: str, seed: int, settings: CurveSettings, directory: str) -> dict:
    started = time.perf_counter()
    _quiet_worker()
    policy = Policy.create(settings.policy_config(seed))
    warm = WarmStartConfig(
        family=family,
        noise=settings.warm_start_noise,
        updates=settings.warm_start_updates,
        seed=seed,
        **({"paraphrase": settings.paraphrase} | settings.warm),
    )
    train, held = settings.splits(family)
    demos = collect_demonstrations(warm, tasks=train)
    supervised_warm_start(policy, demos.rows, warm)
    save_policy(policy, directory)
    return {
        "family": family,
        "seed": seed,
        "heldout_success": evaluate(policy, held[: settings.eval_tasks], settings.eval_episodes),
        "demo_episodes": len(demos.episodes),
        "seconds": round(time.perf_counter() - started, 1),
    }


def method_job(family: str, seed: int, method: str, settings: CurveSettings, directory: str) -> dict:
    started = time.perf_counter()
    _quiet_worker()
    algorithm, method_overrides = METHODS[method]
    overrides = {**method_overrides, **settings.learner_for(algorithm)}
    learner = Learner(
        load_policy(directory, device="cpu"), LearnerConfig(algorithm=algorithm, seed=seed, **overrides)
    )
    loop = LoopConfig(
        family=family,
        rounds=10_000,
        env_step_budget=settings.env_steps,
        episodes_per_round=settings.episodes_per_round,
        updates_per_round=settings.updates_per_round,
        group_size=settings.group_size,
        behaviour_lag=settings.behaviour_lag,
        eval_tasks=settings.eval_tasks,
        train_eval_tasks=settings.train_eval_tasks,
        eval_episodes_per_task=settings.eval_episodes,
        seed=seed,
        paraphrase=settings.paraphrase,
    )
    train, held = settings.splits(family)

    def report(r) -> None:
        print(
            f"{family:8s} seed {seed} {method:12s} round {r.round:3d} env_steps {r.env_steps:6d} "
            f"held-out {r.heldout_success:.3f}",
            flush=True,
        )

    rounds = train_rounds(learner, loop, report, train_tasks=train, test_tasks=held)
    heldout = [r.heldout_success for r in rounds]
    return {
        "family": family,
        "seed": seed,
        "method": method,
        "final_heldout": sum(heldout[-LAST_K:]) / len(heldout[-LAST_K:]),
        "best_heldout": max(heldout),
        "wall_s": round(time.perf_counter() - started, 1),
        "learner_config": overrides,
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
                "learner": {k: round(v, 4) for k, v in r.metrics.items() if k in ROUND_METRICS},
            }
            for r in rounds
        ],
    }


def run_jobs(fn: Callable[..., dict], jobs: list[tuple], workers: int) -> list[dict]:
    """fn(*job) for every job, in worker processes when workers > 1; results in job order."""
    if workers <= 1:
        return [fn(*job) for job in jobs]
    results: list[dict | None] = [None] * len(jobs)
    # spawn: a forked copy of a process that already ran torch can deadlock in its thread pools.
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(fn, *job): i for i, job in enumerate(jobs)}
        for future in as_completed(futures):
            results[futures[future]] = future.result()
    return results  # type: ignore[return-value]


def summarise(warm: list[dict], runs: list[dict], families: list[str], methods: list[str]) -> dict:
    summary: dict[str, dict] = {}
    for family in families:
        per_method = {}
        for method in methods:
            finals = [r["final_heldout"] for r in runs if r["family"] == family and r["method"] == method]
            per_method[method] = {**t_interval(finals), "per_seed": finals}
        entry: dict = {
            "warm_start": t_interval([w["heldout_success"] for w in warm if w["family"] == family]),
            "methods": per_method,
        }
        if "aride" in per_method and "digirl" in per_method:
            aride, digirl = per_method["aride"], per_method["digirl"]
            entry["aride_vs_digirl"] = {
                "relative_gain_of_means": aride["mean"] / digirl["mean"] - 1 if digirl["mean"] > 0 else None,
                "paired_difference": t_interval(
                    [a - d for a, d in zip(aride["per_seed"], digirl["per_seed"], strict=True)]
                ),
            }
        if "aride" in per_method:  # every other method against A-RIDE's defaults, seed by seed
            entry["vs_aride"] = {
                method: t_interval(
                    [m - a for m, a in zip(s["per_seed"], per_method["aride"]["per_seed"], strict=True)]
                )
                for method, s in per_method.items()
                if method != "aride"
            }
        summary[family] = entry
    return summary


def print_summary(summary: dict, evaluated_on: str) -> None:
    for family, entry in summary.items():
        print(f"\n{family}: final {evaluated_on} success, mean of the last {LAST_K} evaluations")
        print(f"  {'warm start':12s} {fmt_interval(entry['warm_start'])}")
        for method, s in entry["methods"].items():
            print(f"  {method:12s} {fmt_interval(s)}  per seed {[round(x, 3) for x in s['per_seed']]}")
        if "aride_vs_digirl" in entry:
            gain = entry["aride_vs_digirl"]
            relative = gain["relative_gain_of_means"]
            shown = "n/a (DigiRL at 0)" if relative is None else f"{relative:+.1%}"
            print(
                f"  A-RIDE vs DigiRL-AWR: {shown} relative (means); paired difference "
                f"{fmt_interval(gain['paired_difference'])}"
            )
        for method, difference in entry.get("vs_aride", {}).items():
            print(f"  {method} − aride (paired over seeds): {fmt_interval(difference)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--family", nargs="+", default=["general"], choices=["general", "webshop"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    add_curve_arguments(parser)
    parser.add_argument("--train-eval-tasks", type=int, default=0, help="also evaluate on N train tasks")
    parser.add_argument("--methods", nargs="+", default=DEFAULT_METHODS, choices=sorted(METHODS))
    parser.add_argument("--no-timing", action="store_true", help="skip the learner-update timing (~20 s)")
    parser.add_argument(
        "--base",
        default=None,
        help="pretrained base: minilm, tiny-minilm (the tiny model on MiniLM's sub-words), tiny-minilm-sem (the "
        "same with MiniLM's element-instruction similarity as a feature), tiny-minilm-ctx (the same reading "
        "MiniLM's contextual token states), smollm2 or a folder "
        "(`distrl pretrained`); default: the tiny model",
    )
    parser.add_argument(
        "--encoder-layers",
        type=int,
        default=1,
        help="an encoder base's top layers trained (0: the heads alone on the frozen encoder)",
    )
    parser.add_argument(
        "--encoder-candidates",
        choices=["pooled", "spans"],
        default="pooled",
        help="how an encoder base reads a candidate: its text alone (pooled) or in place in the screen (spans)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (one torch thread each)")
    parser.add_argument("--out", default="bench/results/learning_curve.json")
    parser.add_argument(
        "--keep-warm",
        metavar="DIR",
        help="keep the warm-start policies as saved versions in DIR/<family>-<seed> (default: a temporary "
        "folder, removed), e.g. for the free-phrasings bench's --policy-dir",
    )
    args = parser.parse_args(argv)
    _quiet_worker()
    curve = curve_settings(args)
    settings = {**vars(args), "learner": curve.learner, "warm": curve.warm}  # as the JSON records them
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="learning-curve-") as tmp:
        root = Path(args.keep_warm or tmp)
        directory = {(f, s): str(root / f"{f}-{s}") for f in args.family for s in args.seeds}
        warm = run_jobs(warm_start_job, [(f, s, curve, directory[f, s]) for f, s in directory], args.jobs)
        for w in warm:
            print(
                f"warm start {w['family']} seed {w['seed']}: held-out {w['heldout_success']:.3f}", flush=True
            )
        timing = (
            None
            if args.no_timing
            else update_timing(directory[args.family[0], args.seeds[0]], args.family[0])
        )
        jobs = [(f, s, m, curve, directory[f, s]) for f, s in directory for m in args.methods]
        runs = run_jobs(method_job, jobs, args.jobs)
    evaluated_on = "validation" if args.validation else "held-out"
    summary = summarise(warm, runs, args.family, args.methods)
    document = {
        "benchmark": "learning_curve",
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "torch_threads": 1,
            "jobs": args.jobs,
        },
        "settings": {
            **settings,
            "score": f"mean of the last {LAST_K} evaluations; interval: 95 % t over seeds",
            "policy": curve.policy_config(args.seeds[0]).to_dict(),
            "learner_defaults": LearnerConfig().to_dict(),
            "evaluated_on": EVALUATED_ON[curve.heldout_split],
        },
        "wall_s": round(time.perf_counter() - started, 1),
        "update_timing": timing,
        "summary": summary,
        "warm_starts": warm,
        "runs": runs,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2))
    from bench._curves import plot_curves

    plot_curves(document, out.with_suffix(".png"))
    print_summary(summary, evaluated_on)
    print(f"\nwrote {out} and {out.with_suffix('.png')} in {document['wall_s']:.0f} s")


def update_timing(directory: str, family: str, repeats: int = 10) -> dict[str, float]:
    """Seconds per A-RIDE update on 16 whole trajectories and on 16 single steps (median)."""
    from distrl_core.learner import StepBatch
    from simulators.rollout import RolloutConfig, run_episodes

    policy = load_policy(directory, device="cpu")
    tasks = load_tasks(family, "train")
    rows = run_episodes(policy, tasks[:: max(1, len(tasks) // 16)][:16], RolloutConfig(seed=1)).rows
    by_episode: dict[str, list[dict]] = {}
    for row in rows:
        by_episode.setdefault(row["episode_id"], []).append(row)
    episodes = list(by_episode.values())[:16]
    steps = [dict(r, episode_id=f"s{i}", step=0, done=True) for i, r in enumerate(rows[:16])]
    learner = Learner(policy, LearnerConfig(critic_warmup_updates=0))
    timings = {}
    for name, batch_rows in (("16_trajectories", [r for e in episodes for r in e]), ("16_steps", steps)):
        batch = StepBatch.from_rows(batch_rows)
        learner.update(batch)  # warm the prompt cache and the allocator
        samples = []
        for _ in range(repeats):
            t = time.perf_counter()
            learner.update(batch)
            samples.append(time.perf_counter() - t)
        timings[f"update_s_{name}"] = round(sorted(samples)[len(samples) // 2], 4)
        timings[f"steps_in_{name}"] = batch.num_steps
    return timings


if __name__ == "__main__":
    main()
