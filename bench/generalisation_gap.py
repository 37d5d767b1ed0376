"""Where held-out success is lost: train vs validation vs test, broken down by task kind, parameter
value (seen in training or not), phrasing template, and the first wrong action of failed episodes.

Per seed: the demo's configuration on General (the warm start, SFT on noisy scripted-expert
demonstrations, then default A-RIDE) at a reduced budget, trained on the *fit* split only
(``validation_split``: the ``*-train-0`` template of each kind held out), so three levels exist:

- ``fit``: the phrasings and parameter values trained on;
- ``validation``: a phrasing never trained on, parameter values mostly seen;
- ``test``: unseen phrasings (with words the tokenizer does not know) and unseen parameter values.

Then greedy episodes on each (``--episodes`` per task, the same environment seeds for every task),
with the scripted expert saying at every step what it would do (``bench._gap_episodes``). Both the
warm start and the trained policy are inspected, so the table shows what RL closes and what it does
not. Writes bench/results/generalisation_gap.json.

    .venv/bin/python -m bench.generalisation_gap [--seeds 0 1 2] [--env-steps 6000]
        [--warm-start-updates 300] [--episodes 2] [--learner KEY=VALUE ...] [--warm KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter, defaultdict
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from bench._common import machine, write_result
from bench._curve_settings import parse_overrides
from bench._gap_episodes import CATEGORIES, Episode, param_value, run_inspected
from bench._stats import fmt_interval, t_interval
from bench.learning_curve import _quiet_worker
from distrl_core.envs.protocol import Task
from distrl_core.learner import Learner, LearnerConfig
from distrl_core.policy import Policy, PolicyConfig
from distrl_core.policy.config import TinyModelConfig
from distrl_core.policy.tokenizer import split_words
from simulators.local_loop import LoopConfig, train_rounds
from simulators.simdroid.tasks import load_tasks, validation_split
from simulators.warm_start import WarmStartConfig, collect_demonstrations, supervised_warm_start

SPLIT_NAMES = ("fit", "validation", "test")
EPISODE_SEED = 7_000_000  # environment seeds of the inspected episodes: seed + repeat


def task_sets(family: str) -> dict[str, list[Task]]:
    fit, validation = validation_split(family)
    return {"fit": fit, "validation": validation, "test": load_tasks(family, "test")}


def _rate(episodes: list[Episode]) -> float:
    return sum(e.success for e in episodes) / len(episodes) if episodes else float("nan")


def breakdown(episodes: dict[str, list[Episode]], fit: list[Task], vocab: set[str]) -> dict[str, Any]:
    """Success per split / kind / seen-or-unseen parameter / template, and first wrong actions."""
    seen_values = {(t.kind, param_value(t)) for t in fit}
    fit_words = {w for t in fit for w in split_words(t.instruction)}
    out: dict[str, Any] = {}
    for split, eps in episodes.items():
        by: dict[str, dict[str, list[Episode]]] = defaultdict(lambda: defaultdict(list))
        for e in eps:
            seen = "seen" if (e.task.kind, param_value(e.task)) in seen_values else "unseen"
            by["kind"][e.task.kind].append(e)
            by["kind_param"][f"{e.task.kind}/{seen}"].append(e)
            by["template"][str(e.task.params.get("template", ""))].append(e)
            words = split_words(e.task.instruction)
            unknown = "unknown_word" if any(w not in vocab for w in words) else "all_words_known"
            novel = "novel_word" if any(w not in fit_words for w in words) else "no_novel_word"
            by["words"][f"{unknown}/{novel}"].append(e)
        failed = [e for e in eps if not e.success]
        first = Counter(str(e.first_wrong) for e in failed)  # always set on a failed episode
        first_by_kind: dict[str, Counter[str]] = defaultdict(Counter)
        for e in failed:
            first_by_kind[e.task.kind][str(e.first_wrong)] += 1
        out[split] = {
            "episodes": len(eps),
            "success": _rate(eps),
            **{
                name: {k: {"n": len(v), "success": _rate(v)} for k, v in sorted(groups.items())}
                for name, groups in by.items()
            },
            "first_wrong": dict(first.most_common()),
            "first_wrong_by_kind": {k: dict(v) for k, v in sorted(first_by_kind.items())},
            "examples": [
                {
                    "task": e.task.instruction,
                    "first_wrong": e.first_wrong,
                    "step": e.first_wrong_step,
                    "expert": e.expected,
                    "policy": e.chosen,
                }
                for e in failed[:12]
            ],
        }
    return out


def inspect(policy, sets: dict[str, list[Task]], episodes: int, env) -> dict[str, list[Episode]]:
    seeds = [EPISODE_SEED + r for r in range(episodes)]
    return {split: run_inspected(policy, tasks, seeds, env) for split, tasks in sets.items()}


def run_seed(seed: int, args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    sets = task_sets(args.family)
    policy = Policy.create(PolicyConfig(device="cpu", seed=seed, tiny=TinyModelConfig(seed=seed)))
    vocab = set(policy.tokenizer.get_vocab())
    warm = WarmStartConfig(
        family=args.family, noise=args.warm_start_noise, updates=args.warm_start_updates, seed=seed,
        **parse_overrides(args.warm),
    )  # fmt: skip
    supervised_warm_start(policy, collect_demonstrations(warm, tasks=sets["fit"]).rows, warm)
    loop = LoopConfig(family=args.family, rounds=10_000, env_step_budget=args.env_steps, seed=seed)
    stages = {"warm_start": breakdown(inspect(policy, sets, args.episodes, loop.env), sets["fit"], vocab)}
    learner = Learner(policy, LearnerConfig(algorithm="aride", seed=seed, **parse_overrides(args.learner)))
    rounds = train_rounds(learner, loop, train_tasks=sets["fit"], test_tasks=sets["validation"])
    with learner.averaged() as trained:
        stages["final"] = breakdown(inspect(trained, sets, args.episodes, loop.env), sets["fit"], vocab)
    summary = ", ".join(f"{s} {stages['final'][s]['success']:.2f}" for s in SPLIT_NAMES)
    print(
        f"seed {seed}: {rounds[-1].env_steps} env steps, {learner.updates} updates; final {summary}",
        flush=True,
    )
    return {
        "seed": seed,
        "env_steps": rounds[-1].env_steps,
        "updates": learner.updates,
        "seconds": round(time.perf_counter() - started, 1),
        "stages": stages,
    }


def _mean_over_seeds(runs: list[dict], stage: str, split: str, table: str) -> dict[str, dict[str, Any]]:
    keys = sorted({k for r in runs for k in r["stages"][stage][split][table]})
    out = {}
    for key in keys:
        cells = [r["stages"][stage][split][table].get(key) for r in runs]
        cells = [c for c in cells if c is not None]
        n = sum(c["n"] for c in cells)
        out[key] = {"episodes": n, "success": sum(c["n"] * c["success"] for c in cells) / n}
    return out


def summarise(runs: list[dict]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for stage in ("warm_start", "final"):
        entry: dict[str, Any] = {}
        for split in SPLIT_NAMES:
            failed: Counter[str] = Counter()
            for r in runs:
                failed.update(r["stages"][stage][split]["first_wrong"])
            total_failed = sum(failed.values())
            entry[split] = {
                "success": t_interval([r["stages"][stage][split]["success"] for r in runs]),
                **{
                    t: _mean_over_seeds(runs, stage, split, t)
                    for t in ("kind", "kind_param", "template", "words")
                },
                "failed_episodes": total_failed,
                "first_wrong_share": {k: v / total_failed for k, v in failed.most_common()}
                if total_failed
                else {},
            }
        summary[stage] = entry
    return summary


def print_summary(summary: dict[str, Any]) -> None:
    for stage, entry in summary.items():
        print(f"\n== {stage}")
        for split in SPLIT_NAMES:
            e = entry[split]
            print(
                f"  {split:10s} success {fmt_interval(e['success'])}; {e['failed_episodes']} failed episodes"
            )
            kinds = ", ".join(f"{k} {v['success']:.2f}" for k, v in e["kind"].items())
            print(f"    per kind: {kinds}")
            params = ", ".join(
                f"{k} {v['success']:.2f} ({v['episodes']})" for k, v in e["kind_param"].items()
            )
            print(f"    per kind/param: {params}")
            shares = ", ".join(f"{k} {v:.0%}" for k, v in e["first_wrong_share"].items())
            print(f"    first wrong action: {shares}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="general", choices=["general", "webshop"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--env-steps", type=int, default=6000, help="environment-step budget of A-RIDE")
    parser.add_argument("--warm-start-updates", type=int, default=300, help="the demo's 300 SFT updates")
    parser.add_argument("--warm-start-noise", type=float, default=0.3)
    parser.add_argument("--episodes", type=int, default=2, help="inspected greedy episodes per task")
    parser.add_argument("--learner", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--warm", nargs="*", default=[], metavar="KEY=VALUE", help="WarmStartConfig overrides"
    )
    parser.add_argument("--out", default="generalisation_gap")
    args = parser.parse_args()
    _quiet_worker()
    before = machine()
    runs = [run_seed(seed, args) for seed in args.seeds]
    summary = summarise(runs)
    document = {
        "benchmark": "generalisation_gap",
        "command": "python -m bench.generalisation_gap "
        + " ".join(
            f"--{k.replace('_', '-')} {' '.join(map(str, v)) if isinstance(v, list) else v}"
            for k, v in vars(args).items()
            if v not in ([], None)
        ),
        "machine": before,
        "categories": CATEGORIES,
        "summary": summary,
        "runs": runs,
    }
    path = write_result(args.out, document)
    print_summary(summary)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
