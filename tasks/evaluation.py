"""Evaluation tasks: a policy version on the held-out split, and `champion` promotion."""

from __future__ import annotations

import math
from collections import defaultdict

from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from distrl_core.envs.simdroid.tasks import load_tasks
from distrl_core.policy import load_policy
from distrl_core.rollout import RolloutConfig, run_episodes
from storage.registry import CHAMPION, PolicyRegistry
from tasks.mlflow_metrics import log_metrics

HELDOUT_TAG = "heldout_success"


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval: sane at 0 and n, unlike the normal approximation."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@task(cache_policy=NO_CACHE)
def evaluate_version(
    version: int,
    *,
    split: str = "test",
    family: str | None = None,
    seed: int = 12345,
    parallel_envs: int = 16,
) -> dict:
    """Greedy rollouts, one per held-out task; success with a 95% interval, per family and per task."""
    registry = PolicyRegistry()
    policy = load_policy(registry.fetch(version).path).eval()
    tasks = load_tasks(family, split)
    config = RolloutConfig(
        greedy=True,
        seed=seed,
        parallel_envs=parallel_envs,
        run_id=f"eval-v{version}",
        pool="eval",
        policy_version=version,
    )
    result = run_episodes(policy, tasks, config)
    family_of = {t.task_id: t.family for t in tasks}
    return summarize(version, split, [(family_of[e.task_id], e.task_id, e.success) for e in result.episodes])


def summarize(version: int, split: str, outcomes: list[tuple[str, str, bool]]) -> dict:
    n = len(outcomes)
    wins = sum(ok for _, _, ok in outcomes)
    low, high = wilson_interval(wins, n)
    families: dict[str, list[bool]] = defaultdict(list)
    per_task: dict[str, list[bool]] = defaultdict(list)
    for family, task_id, ok in outcomes:
        families[family].append(ok)
        per_task[task_id].append(ok)
    return {
        "version": version,
        "split": split,
        "episodes": n,
        "success": wins / n if n else 0.0,
        "ci_low": low,
        "ci_high": high,
        "families": {f: sum(v) / len(v) for f, v in sorted(families.items())},
        "tasks": {t: sum(v) / len(v) for t, v in sorted(per_task.items())},
    }


def report_markdown(report: dict, baseline: dict | None = None) -> str:
    lines = [
        f"## Held-out evaluation of policy version {report['version']} ({report['split']} split)",
        "",
        "| | success | 95% CI | episodes |",
        "|---|---|---|---|",
    ]
    for name, item in (("baseline", baseline), ("this version", report)):
        if item is not None:
            lines.append(
                f"| {name} (v{item['version']}) | {item['success']:.1%} | "
                f"{item['ci_low']:.1%}–{item['ci_high']:.1%} | {item['episodes']} |"
            )
    lines += ["", "| family | success |", "|---|---|"]
    lines += [f"| {family} | {rate:.1%} |" for family, rate in report["families"].items()]
    return "\n".join(lines)


@task(retries=3, retry_delay_seconds=2, cache_policy=NO_CACHE)
def record_evaluation(report: dict, min_improvement: float = 0.0) -> bool:
    """Log the evaluation to MLflow and the Prefect UI; move `champion` if it beats the current one.

    It beats it when its success exceeds the champion's recorded success by more than
    `min_improvement` (0: any gain); a champion never evaluated is always beaten.
    """
    registry = PolicyRegistry()
    version = report["version"]
    run_id = registry.start_run(
        f"evaluate-v{version}", tags={"role": "evaluation", "policy_version": str(version)}
    )
    metrics = {
        "heldout_success": report["success"],
        "heldout_ci_low": report["ci_low"],
        "heldout_ci_high": report["ci_high"],
    }
    metrics |= {f"heldout_success_{family}": rate for family, rate in report["families"].items()}
    log_metrics(registry, run_id, metrics, step=version)
    registry.client.log_dict(run_id, report, "evaluation.json")
    registry.client.set_terminated(run_id)
    registry.client.set_model_version_tag(
        registry.name, str(version), HELDOUT_TAG, f"{report['success']:.6f}"
    )
    champion = registry.resolve(CHAMPION)
    champion_score = None
    if champion is not None:
        champion_score = float(registry.tags(champion).get(HELDOUT_TAG, "-1"))
    promoted = champion is None or report["success"] > champion_score + min_improvement
    if promoted:
        registry.set_alias(CHAMPION, version)
    previous = "none" if champion is None else f"v{champion} at {champion_score:.1%}"
    create_markdown_artifact(
        report_markdown(report)
        + f"\n\nprevious champion: {previous}; champion now: v{version if promoted else champion}",
        key=f"evaluation-v{version}",
        description="held-out success of a policy version",
    )
    return promoted
