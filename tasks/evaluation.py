"""Evaluation tasks: a policy version on the held-out split, and `champion` promotion."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from distrl_core.envs.simdroid.tasks import load_tasks
from distrl_core.learner.evaluation import (
    HELDOUT_SEED,
    IN_DISTRIBUTION_SEED,
    estimate_success,
)
from distrl_core.policy import load_policy
from storage.registry import CHAMPION, PolicyRegistry
from tasks.mlflow_metrics import log_metrics, start_tracked_run
from tasks.retry import only_transient, with_retries

HELDOUT_TAG = "heldout_success"
CURVE_ROLE = "learning_curve"  # the MLflow run that holds held-out success per version (step = version)
CURVE_KEYS = ("heldout_success", "heldout_ci_low", "heldout_ci_high")


@task(cache_policy=NO_CACHE, task_run_name="evaluate v{version} ({split} split)")
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
                f"{item['ci_low']:.1%}-{item['ci_high']:.1%} | {item['episodes']} |"
            )
    for name, item in (("baseline", baseline), ("this version", report)):
        inside = (item or {}).get("in_distribution")
        if inside is not None:
            lines.append(
                f"| {name}, train tasks (fresh seeds) | {inside['success']:.1%} | "
                f"{inside['ci_low']:.1%}-{inside['ci_high']:.1%} | {inside['episodes']} |"
            )
    lines += ["", "| family | success |", "|---|---|"]
    lines += [f"| {family} | {rate:.1%} |" for family, rate in report["families"].items()]
    return "\n".join(lines)


@task(retries=3, retry_delay_seconds=2, retry_condition_fn=only_transient, cache_policy=NO_CACHE)
def record_evaluation(report: dict, min_improvement: float = 0.0) -> bool:
    """Log the evaluation to MLflow and the Prefect UI; move `champion` if it beats the current one.

    It beats it when its success exceeds the champion's recorded success by more than
    `min_improvement` (0: any gain); a champion never evaluated is always beaten.
    """
    registry = PolicyRegistry()
    version = report["version"]
    run_id = start_tracked_run(
        registry,
        f"evaluate-v{version}",
        tags={"role": "evaluation", "policy_version": str(version)},
        params={
            "policy_version": version,
            "split": report["split"],
            "families": ",".join(report["families"]),
            "episodes": report["episodes"],
            "min_improvement": min_improvement,
        },
    )
    metrics = curve_metrics(report)
    if "in_distribution" in report:
        metrics["in_distribution_success"] = report["in_distribution"]["success"]
    log_metrics(registry, run_id, metrics, step=version)
    registry.client.log_dict(run_id, report, "evaluation.json")
    registry.client.set_terminated(run_id)
    protocol = f"{report['split']}: {'+'.join(report['families'])}"
    curve = _log_learning_curve(registry, version, protocol, metrics)
    registry.client.set_model_version_tag(
        registry.name, str(version), HELDOUT_TAG, f"{report['success']:.6f}"
    )
    champion = registry.resolve(CHAMPION)
    champion_score = None if champion is None else float(registry.tags(champion).get(HELDOUT_TAG, "-1"))
    promoted = champion_score is None or report["success"] > champion_score + min_improvement
    if promoted:
        registry.set_alias(CHAMPION, version)
    previous = "none" if champion is None else f"v{champion} at {champion_score:.1%}"
    get_run_logger().info(
        "policy v%d on the %s split: %.1f%% held-out success (95%% CI %.1f%%-%.1f%%, %d episodes; %s); "
        "previous champion %s; %s",
        version,
        report["split"],
        100 * report["success"],
        100 * report["ci_low"],
        100 * report["ci_high"],
        report["episodes"],
        ", ".join(f"{f} {100 * r:.1f}%" for f, r in report["families"].items()),
        previous,
        f"v{version} is now champion" if promoted else f"champion stays v{champion}",
    )
    create_markdown_artifact(
        report_markdown(report)
        + f"\n\nprevious champion: {previous}; champion now: v{version if promoted else champion}",
        key=f"evaluation-v{version}",
        description="held-out success of a policy version",
    )
    create_table_artifact(
        _curve_table(curve, version if promoted else champion),
        key="heldout-learning-curve",
        description="held-out success by policy version (the learning curve; also the MLflow run "
        "'held-out learning curve', metric heldout_success against step)",
    )
    return promoted


def curve_metrics(report: dict) -> dict[str, float]:
    """Held-out success and its 95% interval, overall and per family (`heldout_success_general`...)."""
    metrics = {
        "heldout_success": report["success"],
        "heldout_ci_low": report["ci_low"],
        "heldout_ci_high": report["ci_high"],
    }
    for family, rate in report["families"].items():
        low, high = report.get("family_ci", {}).get(family, (float("nan"), float("nan")))
        metrics |= {
            f"heldout_success_{family}": rate,
            f"heldout_ci_low_{family}": low,
            f"heldout_ci_high_{family}": high,
        }
    return metrics


def _curve_run(registry: PolicyRegistry, protocol: str) -> str:
    """The learning-curve run of a registered model and an evaluation protocol (split and families:
    scores of different protocols are not one curve), created on first use."""
    found = registry.client.search_runs(
        [registry.experiment_id()],
        f"tags.role = '{CURVE_ROLE}' and tags.model = '{registry.name}' and tags.protocol = '{protocol}'",
        order_by=["attributes.start_time ASC"],
        max_results=1,
    )
    if found:
        return found[0].info.run_id
    return start_tracked_run(
        registry,
        f"held-out learning curve ({protocol})",
        tags={"role": CURVE_ROLE, "model": registry.name, "protocol": protocol},
        params={"model": registry.name, "protocol": protocol, "x_axis": "policy version (metric step)"},
    )


def _log_learning_curve(
    registry: PolicyRegistry, version: int, protocol: str, metrics: dict[str, float]
) -> list[dict]:
    """Held-out success as one series per metric with step = policy version, on the curve run and on
    the run that published the version (the learner's); returns the curve so far, version by version."""
    curve_run = with_retries(lambda: _curve_run(registry, protocol), "finding the learning-curve run")
    log_metrics(registry, curve_run, metrics, step=version)
    source = registry.client.get_model_version(registry.name, str(version)).run_id
    if source:
        log_metrics(registry, source, metrics, step=version)
    history = {key: registry.client.get_metric_history(curve_run, key) for key in CURVE_KEYS}
    rows: dict[int, dict] = {}
    for key, points in history.items():
        for point in points:  # a version evaluated twice: the newest value wins
            rows.setdefault(point.step, {"version": point.step})[key] = point.value
    return [rows[v] for v in sorted(rows)]


def _curve_table(curve: list[dict], champion: int | None) -> list[dict]:
    return [
        {
            "version": f"v{row['version']}" + (" (champion)" if row["version"] == champion else ""),
            "held-out success": f"{row.get('heldout_success', float('nan')):.1%}",
            "95% CI": f"{row.get('heldout_ci_low', float('nan')):.1%}-{row.get('heldout_ci_high', float('nan')):.1%}",
        }
        for row in curve
    ]
