"""Evaluation tasks: a policy version on the held-out split, and `champion` promotion."""

from __future__ import annotations

from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from distrl_core.envs.simdroid.tasks import load_tasks
from distrl_core.learner.evaluation import (
    HELDOUT_SEED,
    IN_DISTRIBUTION_SEED,
    estimate_success,
)
from distrl_core.policy import load_policy
from storage.registry import CHAMPION, PolicyRegistry
from tasks.mlflow_metrics import log_metrics

HELDOUT_TAG = "heldout_success"


@task(cache_policy=NO_CACHE)
def evaluate_version(
    version: int,
    *,
    split: str = "test",
    family: str | None = None,
    seed: int = HELDOUT_SEED,
    parallel_envs: int = 16,
    episodes_per_task: int = 3,
    in_distribution: bool = True,
) -> dict:
    """Greedy rollouts, `episodes_per_task` per task of `split`, with the 95% interval, per family and
    per task; with `in_distribution`, beside it the same on the train tasks under fresh env seeds
    ("it learned" and "it generalises" are two numbers). Exact on a re-run: seeds are fixed."""
    registry = PolicyRegistry()
    policy = load_policy(registry.fetch(version).path).eval()
    estimate = estimate_success(
        policy,
        load_tasks(family, split),
        episodes_per_task=episodes_per_task,
        seed=seed,
        parallel=parallel_envs,
        policy_version=version,
    )
    report = {"version": version, "split": split, **estimate.as_dict()}
    if in_distribution and split != "train":
        train = estimate_success(
            policy,
            load_tasks(family, "train"),
            episodes_per_task=1,
            seed=IN_DISTRIBUTION_SEED,
            parallel=parallel_envs,
            policy_version=version,
        )
        report["in_distribution"] = {k: v for k, v in train.as_dict().items() if k != "tasks"}
    return report


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
    for name, item in (("baseline", baseline), ("this version", report)):
        inside = (item or {}).get("in_distribution")
        if inside is not None:
            lines.append(
                f"| {name}, train tasks (fresh seeds) | {inside['success']:.1%} | "
                f"{inside['ci_low']:.1%}–{inside['ci_high']:.1%} | {inside['episodes']} |"
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
    if "in_distribution" in report:
        metrics["in_distribution_success"] = report["in_distribution"]["success"]
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
