"""The `collect` flow: one collector of an agent pool, running until told to stop.

It never waits for the learner: between task runs (~`task_run_seconds` of batches each, 20 s by
default) it polls the registry (one cheap call, not a task run) and swaps in a newer version when
there is one, so a collector acts with a version at most ~one task run old. A crash loses at most
the unflushed buffer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from prefect import flow, get_run_logger

from distrl_core.policy.defaults import configure_threads
from tasks.collector import (
    FINAL_FLUSH_WAIT_S,
    CollectorParams,
    close_collector,
    collect_episodes,
    flush_shard,
    interrupt_waits_on,
    load_policy_version,
    open_collector,
    poll_policy_version,
)
from tasks.mlflow_metrics import flush_queued_metrics, start_tracked_run
from tasks.progress import BoundedProgress
from tasks.retry import with_retries
from tasks.run_log import report_in_run_log
from tasks.stop import StopToken, find_token, should_stop

MAX_BATCHES_PER_TASK_RUN = 64
POLL_WAIT_S = 2.0  # between registry polls while the alias points at no version yet
# A collector started before the learner's first publish waits minutes: say so once, then once a
# minute, not on every poll (it was 21 identical lines in the first 42 s).
WAITING_LOG_EVERY_S = 60.0


def _run_name() -> str:
    from prefect.runtime import flow_run

    params = flow_run.get_parameters().get("params") or {}
    if isinstance(params, CollectorParams):
        params = params.model_dump()
    defaults = CollectorParams()
    return f"collect-{params.get('pool', defaults.pool)}-{params.get('collector_id', defaults.collector_id)}"


class NoPolicyVersion(RuntimeError):
    """The followed alias still points at no version after `max_wait_minutes`."""


@dataclass
class CollectingBudget:
    """`max_minutes` of collecting, counted from the first policy version: a collector started while
    the learner's warm start runs waits for version 1 first, and that wait (bounded only by
    `max_wait_minutes`) must not use its budget up, or it would end Completed with 0 episodes."""

    max_minutes: float | None
    max_wait_minutes: float | None
    opened: float = field(default_factory=time.monotonic)
    deadline: float | None = None
    """None until the budget starts (and always without `max_minutes`)."""
    started: bool = False
    waiting_since: float | None = None
    """When the alias was first seen pointing at no version (None: it points at one)."""
    said_at: float = 0.0

    def start(self, now: float) -> float:
        """Start the budget (once); the seconds spent waiting before it."""
        self.started = True
        if self.max_minutes is not None:
            self.deadline = now + 60 * self.max_minutes
        return now - self.opened

    def wait(self, alias: str) -> None:
        """One wait between registry polls while `alias` points at no version: said once, then once
        a minute; past `max_wait_minutes` (before the first version) the run fails, saying why."""
        now = time.monotonic()
        if self.waiting_since is None or now - self.said_at >= WAITING_LOG_EVERY_S:
            self.waiting_since = now if self.waiting_since is None else self.waiting_since
            self.said_at = now
            get_run_logger().info(
                "no policy version yet for alias %r; waiting (%.0f s so far, checking every %g s)",
                alias,
                now - self.waiting_since,
                POLL_WAIT_S,
            )
        self._check_wait(now, alias)
        time.sleep(POLL_WAIT_S)

    def _check_wait(self, now: float, alias: str) -> None:
        if self.started or self.max_wait_minutes is None or now - self.opened < 60 * self.max_wait_minutes:
            return
        raise NoPolicyVersion(
            f"no policy version for alias {alias!r} after {self.max_wait_minutes:g} minutes "
            "(max_wait_minutes): start the learner (`prefect deployment run learn/learn`), which "
            "publishes its warm start as version 1, or raise max_wait_minutes"
        )


def next_batches(
    params: CollectorParams,
    seconds_per_batch: float | None,
    episodes_done: int,
    seconds_left: float | None = None,
) -> int:
    """Batches for the next task run: ~`task_run_seconds` of them at the measured pace, within the
    bounds (episodes left, and the time left: a task run is planned, named and run whole)."""
    if seconds_per_batch is None or params.task_run_seconds <= 0:
        batches = 1  # the first task run measures the pace
    else:
        seconds = (
            params.task_run_seconds if seconds_left is None else min(params.task_run_seconds, seconds_left)
        )
        batches = round(seconds / max(seconds_per_batch, 1e-6))
    batches = max(1, min(batches, MAX_BATCHES_PER_TASK_RUN))
    if params.max_episodes is not None:
        left = params.max_episodes - episodes_done
        batches = min(batches, max(1, -(-left // params.episodes_per_batch)))
    return batches


def _start_budget(budget: CollectingBudget, progress: BoundedProgress, version: int) -> None:
    now = time.monotonic()
    waited = budget.start(now)
    progress.started = now  # the progress bar of a time bound follows the budget, not the wait
    if budget.max_minutes is not None:
        get_run_logger().info(
            "collecting with version %d after %.0f s of waiting for it: the %g-minute budget "
            "(max_minutes) starts now",
            version,
            waited,
            budget.max_minutes,
        )


@flow(name="collect", flow_run_name=_run_name)
def collect(params: CollectorParams | None = None, stop_token: str | None = None) -> dict[str, float]:
    """Collect episodes with the newest policy until a bound is reached (or the run is cancelled).

    Args:
        params: the collector: pool, name, environments, the alias it follows, bounds, shard sizes.
        stop_token: process-local stop signal of an embedded run; leave empty in a deployment.
    """
    params = params or CollectorParams()
    logger = get_run_logger()
    if stop_token is None:  # a deployment's own process (embedded runs share theirs): act on 1 thread
        logger.info("torch threads for acting: %d", configure_threads("collector"))
        report_in_run_log()  # each shard written, each retry: one line in the worker's output
    session = open_collector(params)
    run = find_token(stop_token)
    if run is not None:  # the embedded run's progress display counts this collector's episodes
        run.attach(session)
    session.mlflow_run_id = run_id = start_tracked_run(
        session.registry,
        f"collector-{params.pool}-{params.collector_id}",
        tags={"role": "collector", "pool": params.pool},
        params={k: v for k, v in params.model_dump().items() if k != "store_uri"},
    )
    budget = CollectingBudget(params.max_minutes, params.max_wait_minutes)
    # An embedded run's stop ends a batch between steps; the deadline does not, because a task run
    # is planned to fit the time left and named by the episodes it collects (`next_batches`).
    session.should_stop = lambda: should_stop(stop_token, None)
    if run is not None:
        interrupt_waits_on(session, run.event)
    progress = BoundedProgress(
        "collector",
        params.max_episodes,
        params.max_minutes,
        key=f"collect-{params.pool}-{params.collector_id}",
    )
    seconds_per_batch: float | None = None
    try:
        while not should_stop(stop_token, budget.deadline):
            if params.max_episodes is not None and session.episodes >= params.max_episodes:
                break
            version = poll_policy_version(session)
            if version is None:
                budget.wait(params.policy_alias)
                continue
            budget.waiting_since = None
            if version != session.version:
                load_policy_version(session, version)
            if not budget.started:
                _start_budget(budget, progress, version)
            left = None if budget.deadline is None else budget.deadline - time.monotonic()
            batches = next_batches(params, seconds_per_batch, session.episodes, left)
            totals = collect_episodes(session, batches, stop_token)
            seconds_per_batch = totals["seconds"] / max(1.0, totals["batches"])
            progress.update(session.episodes)
        flush_shard(session, wait_s=FINAL_FLUSH_WAIT_S)  # acknowledged episodes reach the store
        progress.update(session.episodes, done=True)
    finally:
        if run is not None:
            run.detach(session)
        close_collector(session)
        flush_queued_metrics(run_id)  # the rows still queued reach the run before it is finished
        with_retries(
            lambda: session.registry.client.set_terminated(run_id), "closing the collector's MLflow run"
        )
    logger.info(
        "collector stopped: %d episodes, %d succeeded (%.1f%%), %d steps; %d unfinished dropped",
        session.episodes,
        session.successes,
        100 * session.successes / max(1, session.episodes),
        session.steps,
        session.abandoned,
    )
    return {
        "episodes": session.episodes,
        "steps": session.steps,
        "successes": session.successes,
        "broken": session.broken,
        "abandoned": session.abandoned,
    }


__all__ = ["StopToken", "collect"]
