"""The `evaluator` flow: follows the registry and scores every newly published version on the
held-out split while training runs (the newest one when it cannot keep up; tasks/evaluator.py says
why), adds each score to its training run's held-out curve in MLflow and to a Prefect table
artifact, and moves `champion` only on a paired, confident improvement.

It never blocks collectors or the learner: it reads the registry and plays its own episodes, in
its own work pool (a deployment) or thread (the embedded run), and the learner never waits for it.
Stopping (stop token, max_minutes or cancel) first scores the newest pending version, so the curve
ends at the last version, and finishes the curves whose training has ended.
"""

from __future__ import annotations

import time
from functools import partial
from typing import TypedDict

from prefect import flow, get_run_logger

from distrl_core.policy.defaults import configure_threads
from storage.registry import PolicyRegistry
from tasks import evaluator as ev
from tasks.evaluation import evaluate_version, record_evaluation
from tasks.retry import with_retries
from tasks.stop import should_stop, signalled


class EvaluatorSummary(TypedDict):
    scored: list[int]  # versions scored by this run, in order
    skipped: list[int]  # versions superseded before they could be scored
    promoted: list[int]  # versions that became champion
    reports: dict[int, dict]  # the evaluation report of each scored version
    closed_curves: list[str]  # curve runs finished because their training ended


def _run_name() -> str:
    from prefect.runtime import flow_run

    params = flow_run.get_parameters().get("params") or {}
    if isinstance(params, ev.EvaluatorParams):
        params = params.model_dump()
    return f"evaluator-{params.get('family') or 'all'}-{params.get('split') or 'test'}"


@flow(name="evaluator", flow_run_name=_run_name)
def evaluator(params: ev.EvaluatorParams | None = None, stop_token: str | None = None) -> EvaluatorSummary:
    """Score new policy versions on the held-out split as they are published, until stopped.

    Args:
        params: what is scored (split, family, episodes per task, seed) and how often to look.
        stop_token: process-local stop signal of an embedded run; leave empty in a deployment.
    """
    params = params or ev.EvaluatorParams()
    logger = get_run_logger()
    if stop_token is None:  # its own process: acting-sized torch threads
        configure_threads("evaluator")
    registry = PolicyRegistry()
    protocol = params.protocol
    newest = ev.newest_scored(with_retries(lambda: ev.version_tags(registry), "reading versions"), protocol)
    logger.info(
        "evaluator on %s: %s", protocol, f"resuming after v{newest}" if newest else "nothing scored yet"
    )
    summary: EvaluatorSummary = {
        "scored": [],
        "skipped": [],
        "promoted": [],
        "reports": {},
        "closed_curves": [],
    }
    started_runs: set[str] = set()
    deadline = None if params.max_minutes is None else time.monotonic() + 60 * params.max_minutes
    while not signalled():  # SIGTERM / Ctrl-C: stop now, without a last evaluation
        stopping = should_stop(stop_token, deadline)
        tags = with_retries(lambda: ev.version_tags(registry), "reading versions")
        version, skipped = ev.choose_next(sorted(tags), newest)
        if version is not None:
            if skipped:
                logger.info("v%s superseded before scoring: scoring the newest, v%d", skipped, version)
            _score(registry, params, version, tags, started_runs, summary)
            summary["skipped"] += skipped
            newest = version
            continue  # look again at once: more may have been published meanwhile
        closed = with_retries(partial(ev.close_ended_curves, registry, protocol, newest), "closing curves")
        for name in closed:
            logger.info("training ended: finished the MLflow run %r", name)
        summary["closed_curves"] += closed
        if stopping:
            break
        time.sleep(params.poll_seconds)
    logger.info(
        "evaluator stopped: scored %s, skipped %s, champion moved to %s",
        summary["scored"],
        summary["skipped"] or "none",
        summary["promoted"] or "none",
    )
    return summary


def _score(
    registry: PolicyRegistry,
    params: ev.EvaluatorParams,
    version: int,
    tags: dict[int, dict[str, str]],
    started_runs: set[str],
    summary: EvaluatorSummary,
) -> None:
    """Evaluate `version` and record it; first put its training run's starting version on the curve."""
    training_run = tags[version].get("run_id")
    if training_run and training_run not in started_runs:
        started_runs.add(training_run)
        _ensure_start_point(registry, params, training_run, tags)
    report = evaluate_version(version, **params.evaluation_args(), in_distribution=False)
    if record_evaluation(report, params.min_improvement, training_run=training_run):
        summary["promoted"].append(version)
    summary["scored"].append(version)
    summary["reports"][version] = report


def _ensure_start_point(
    registry: PolicyRegistry, params: ev.EvaluatorParams, training_run: str, tags: dict[int, dict[str, str]]
) -> None:
    """A learner's curve starts at the version it started from (its run's `parent_version` tag),
    at 0 s and 0 steps: from the recorded outcomes when it was scored alike, else scored now."""
    parent = registry.client.get_run(training_run).data.tags.get("parent_version", "")
    if not parent.isdigit() or int(parent) not in tags:
        return
    start = int(parent)
    if ev.start_point_logged(registry, training_run, params.protocol, start):
        return
    report = ev.report_from_tags(start, tags[start], params.protocol, registry)
    if report is None:
        report = evaluate_version(start, **params.evaluation_args(), in_distribution=False)
        record_evaluation(report, params.min_improvement, training_run=training_run, starting_version=True)
        return
    from tasks import heldout_curve

    heldout_curve.log_point(registry, report, training_run=training_run, seconds=0.0, env_steps=0)
