"""Evaluation tasks: a policy version on the held-out split, and `champion` promotion.

A protocol (split, families, episodes per task, seed) fixes which episodes are played, so two
versions evaluated under one protocol pair up episode by episode. Each scored version keeps its
outcomes in registry tags (`heldout_protocol`, `heldout_outcomes`, `heldout_success`): the champion
rule compares a challenger with the champion on the same episodes
(`distrl_core.learner.champion`), and a restarted evaluator knows what it already scored.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from distrl_core.envs.screen import ObservationKind
from distrl_core.learner.champion import PairedDifference, beats_with_confidence
from distrl_core.policy import load_policy
from simulators.evaluation import (
    HELDOUT_SEED,
    IN_DISTRIBUTION_SEED,
    estimate_success,
    outcomes_from_text,
)
from simulators.rollout import RolloutConfig
from simulators.simdroid.tasks import TRAINED_BESIDE, load_tasks
from storage.registry import CHAMPION, PolicyRegistry
from tasks import curve_links, heldout_curve
from tasks.mlflow_metrics import log_metrics, start_tracked_run
from tasks.retry import only_transient

# MLflow's search grammar has no bound parameters: the version is an int, the protocol a
# `protocol_name` (no quotes).
EVALUATION_RUNS = (
    "tags.role = 'evaluation' and tags.policy_version = '{version}' and params.protocol = '{protocol}'"
)
if TYPE_CHECKING:
    from mlflow.entities import Run

HELDOUT_TAG = "heldout_success"
PROTOCOL_TAG = "heldout_protocol"
OUTCOMES_TAG = "heldout_outcomes"


def in_distribution_split(split: str) -> str:
    """The task set trained on beside the held-out `split` (test: train; validation_words: fit_words):
    an evaluation on validation never loads the test split, nor scores the validation tasks as trained."""
    return TRAINED_BESIDE.get(split, split)


def protocol_name(
    split: str, family: str | None, episodes_per_task: int, seed: int, observation: str = "tree"
) -> str:
    """The episodes an evaluation plays, as a name: same name, same episodes (pairable outcomes).
    The screen observation is a different protocol (``:screen``): its scores pair only with its own."""
    suffix = "" if observation == "tree" else f":{observation}"
    return f"{split}:{family or 'all'}:{episodes_per_task}x:seed{seed}{suffix}"


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
    observation: ObservationKind = "tree",
) -> dict:
    """Greedy rollouts, `episodes_per_task` per task of `split`, with the 95% interval, per family and
    per task; with `in_distribution`, beside it the same on the train tasks under fresh env seeds
    ("it learned" and "it generalises" are two numbers; "the train tasks" are those trained on beside
    `split`: `in_distribution_split`). Exact on a re-run: seeds are fixed."""
    registry = PolicyRegistry()
    policy = load_policy(registry.fetch(version).path).eval()
    # the rollouts' default env; a vision-language policy reads each step's screenshot
    env = dataclasses.replace(RolloutConfig().env, observation=observation, screenshots=policy.config.vision)
    estimate = estimate_success(
        policy,
        load_tasks(family, split),
        env,
        episodes_per_task=episodes_per_task,
        seed=seed,
        parallel=parallel_envs,
        policy_version=version,
    )
    report = {
        "version": version,
        "split": split,
        "family": family,
        "seed": seed,
        "protocol": protocol_name(split, family, episodes_per_task, seed, observation),
        **estimate.as_dict(),
    }
    trained = in_distribution_split(split)
    if in_distribution and trained != split:
        train = estimate_success(
            policy,
            load_tasks(family, trained),
            env,
            episodes_per_task=1,
            seed=IN_DISTRIBUTION_SEED,
            parallel=parallel_envs,
            policy_version=version,
        )
        report["in_distribution"] = {
            k: v for k, v in train.as_dict().items() if k not in ("tasks", "outcomes")
        } | {"split": trained}
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
                f"| {name}, {inside.get('split', 'train')} tasks (fresh seeds) | {inside['success']:.1%} | "
                f"{inside['ci_low']:.1%}-{inside['ci_high']:.1%} | {inside['episodes']} |"
            )
    lines += ["", "| family | success |", "|---|---|"]
    lines += [f"| {family} | {rate:.1%} |" for family, rate in report["families"].items()]
    return "\n".join(lines)


def scored_outcomes(registry: PolicyRegistry, version: int, protocol: str) -> tuple[bool, ...] | None:
    """The outcomes recorded for `version` under `protocol`, or None if it was not scored so."""
    tags = registry.tags(version)
    if tags.get(PROTOCOL_TAG) != protocol or OUTCOMES_TAG not in tags:
        return None
    return outcomes_from_text(tags[OUTCOMES_TAG])


def _tag_scores(registry: PolicyRegistry, report: dict) -> None:
    version = str(report["version"])
    for key, value in (
        (HELDOUT_TAG, f"{report['success']:.6f}"),
        (PROTOCOL_TAG, report["protocol"]),
        (OUTCOMES_TAG, report["outcomes"]),
    ):
        registry.client.set_model_version_tag(registry.name, version, key, value)


def champion_outcomes(registry: PolicyRegistry, report: dict) -> tuple[int | None, tuple[bool, ...] | None]:
    """The champion and its outcomes under the report's protocol; a champion scored under another
    protocol (or before outcomes were kept) is evaluated again first, so the comparison is paired."""
    champion = registry.resolve(CHAMPION)
    if champion is None or champion == report["version"]:
        return champion, None
    outcomes = scored_outcomes(registry, champion, report["protocol"])
    if outcomes is None:
        again = evaluate_version.fn(
            champion,
            split=report["split"],
            family=report.get("family"),
            seed=report.get("seed", HELDOUT_SEED),
            episodes_per_task=report["episodes_per_task"],
            in_distribution=False,
        )
        _tag_scores(registry, again)
        outcomes = outcomes_from_text(again["outcomes"])
    return champion, outcomes


def _comparison_text(
    champion: int | None, diff: PairedDifference | None, promoted: bool, version: int
) -> str:
    if champion is None:
        return f"no champion yet: v{version} is now champion"
    if diff is None:
        return f"v{version} is the champion"
    verdict = f"v{version} is now champion" if promoted else f"champion stays v{champion}"
    return (
        f"paired with champion v{champion} on {diff.pairs} episodes: difference {diff.mean:+.1%} "
        f"(95% CI {diff.low:+.1%} to {diff.high:+.1%}; {diff.challenger_wins} won, "
        f"{diff.champion_wins} lost); {verdict}"
    )


@task(retries=3, retry_delay_seconds=2, retry_condition_fn=only_transient, cache_policy=NO_CACHE)
def record_evaluation(
    report: dict,
    min_improvement: float = 0.0,
    *,
    training_run: str | None = None,
    starting_version: bool = False,
    add_to_curve: bool = True,
) -> bool:
    """Log the evaluation to MLflow and the Prefect UI, add it to its training run's held-out curve,
    and move `champion` when the version is better than the champion with confidence: the lower end
    of the 95 % interval of the paired difference on the same episodes is above `min_improvement`.

    `training_run`: the curve the point belongs to (default: the run that published the version);
    `starting_version`: the version is that run's start (warm start, retrain parent), at (0 s, 0 steps);
    `add_to_curve=False`: no curve point (a warm start scored before its learner exists; the
    evaluator puts it at the start of the learner's curve).
    """
    registry = PolicyRegistry()
    version = report["version"]
    # The same protocol plays the same episodes: a version scored so already (the continuous
    # evaluator and a retrain both score new versions) keeps its one MLflow run.
    if evaluation_run(registry, version, report["protocol"]) is None:
        _log_evaluation_run(registry, report, min_improvement)
    _tag_scores(registry, report)

    champion, champion_scores = champion_outcomes(registry, report)
    promoted, diff = beats_with_confidence(
        outcomes_from_text(report["outcomes"]), champion_scores, margin=min_improvement
    )
    if champion == version:
        promoted = False
    if promoted:
        registry.set_alias(CHAMPION, version)
    comparison = _comparison_text(champion, diff, promoted, version)
    curve, points = (
        _add_to_curve(registry, report, training_run, starting_version) if add_to_curve else ("", [])
    )
    now_champion = version if promoted else champion
    get_run_logger().info(
        "policy v%d on %s: %.1f%% held-out success (95%% CI %.1f%%-%.1f%%, %d episodes; %s); %s",
        version,
        report["protocol"],
        100 * report["success"],
        100 * report["ci_low"],
        100 * report["ci_high"],
        report["episodes"],
        ", ".join(f"{f} {100 * r:.1f}%" for f, r in report["families"].items()),
        comparison,
    )
    create_markdown_artifact(
        report_markdown(report) + f"\n\n{comparison}",
        key=f"evaluation-v{version}",
        description="held-out success of a policy version",
    )
    if points:
        curve_run = registry.client.get_run(curve)
        create_table_artifact(
            heldout_curve.curve_table(points, now_champion),
            key="heldout-learning-curve",
            description="held-out success by policy version, minutes since the learner started and env "
            f"steps (in MLflow: {curve_links.link_markdown(registry, curve_run)})",
        )
        curve_links.link_curve(registry, curve_run)
    return promoted


def evaluation_run(registry: PolicyRegistry, version: int, protocol: str) -> Run | None:
    """The newest MLflow run of `version` evaluated under `protocol`, if any."""
    found = registry.client.search_runs(
        [registry.experiment_id()],
        EVALUATION_RUNS.format(version=int(version), protocol=protocol.replace("'", "")),
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    return found[0] if found else None


def _log_evaluation_run(registry: PolicyRegistry, report: dict, min_improvement: float) -> None:
    version = report["version"]
    run_id = start_tracked_run(
        registry,
        f"evaluate-v{version}",
        tags={"role": "evaluation", "policy_version": str(version)},
        params={
            "policy_version": version,
            "split": report["split"],
            "protocol": report["protocol"],
            "families": ",".join(report["families"]),
            "episodes": report["episodes"],
            "min_improvement": min_improvement,
        },
    )
    metrics = heldout_curve.curve_metrics(report)
    if "in_distribution" in report:
        metrics["in_distribution_success"] = report["in_distribution"]["success"]
    log_metrics(registry, run_id, metrics, step=version)
    registry.client.log_dict(run_id, report, "evaluation.json")
    registry.client.set_terminated(run_id)


def _add_to_curve(
    registry: PolicyRegistry, report: dict, training_run: str | None, starting_version: bool
) -> tuple[str, list[heldout_curve.CurvePoint]]:
    """The curve run the version's point went to, and the curve's points ("" and none without one)."""
    version = int(report["version"])
    run = training_run or heldout_curve.training_run_of(registry, version)
    if run is None:
        return "", []
    seconds, env_steps = heldout_curve.axes_of(registry.tags(version), starting_version=starting_version)
    curve = heldout_curve.log_point(registry, report, training_run=run, seconds=seconds, env_steps=env_steps)
    return curve, heldout_curve.read_curve(registry, curve)
