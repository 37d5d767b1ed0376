"""The `learn` flow: ingest, sample, update, write priorities back, publish every K updates.

It resumes from the newest published version and from the priorities persisted in the store, so
a crashed learner loses at most the updates since its last publish. On an empty registry (a fresh
deployment) it first publishes a warm start as version 1, so that the collectors, which wait for a
version, have something to act with.
"""

from __future__ import annotations

import logging
import time
from typing import TypedDict

from prefect import flow, get_run_logger

from distrl_core.policy.config import policy_config_for
from distrl_core.policy.defaults import configure_threads
from simulators.warm_start import WarmStartConfig
from storage.registry import PolicyRegistry
from storage.replay_config import ReplaySettings
from tasks.learner import (
    LearnerParams,
    LearnerSession,
    checkpoint_replay,
    close_learner,
    ingest_shards,
    open_learner,
    publish_policy,
    replay_waiting,
    train_block,
)
from tasks.progress import BoundedProgress
from tasks.retry import with_retries
from tasks.run_log import report_in_run_log
from tasks.stop import find_token, should_stop
from tasks.warm_start import warm_start_policy


def _run_name() -> str:
    from prefect.runtime import flow_run

    params = flow_run.get_parameters().get("params") or {}
    if isinstance(params, LearnerParams):
        params = params.model_dump()
    name = f"learn-{params.get('algorithm') or LearnerParams().algorithm}"
    return name + (f"-{params['max_updates']}-updates" if params.get("max_updates") else "")


class LearnSummary(TypedDict):
    updates: int  # the learner's count, resumed ones included
    published: list[int]  # versions this run published
    samples_seen: int
    duty_cycle: float


@flow(name="learn", flow_run_name=_run_name)
def learn(
    params: LearnerParams | None = None,
    replay: ReplaySettings | None = None,
    stop_token: str | None = None,
    bootstrap: bool = True,
    warm_start: WarmStartConfig | None = None,
    base: str | None = None,
) -> LearnSummary:
    """Learn from the shards in the store, publishing a version every K updates, until a bound is reached.

    Args:
        params: the learner: batch size, updates per block, publish interval, bounds, algorithm.
        replay: prioritized replay settings; None reads them from `DISTRL_REPLAY_*` variables.
        stop_token: process-local stop signal of an embedded run; leave empty in a deployment.
        bootstrap: on an empty registry, publish a warm start as version 1 first (False: fail).
        warm_start: settings of that warm start; None uses `WarmStartConfig`'s defaults.
        base: pretrained base of that warm start's policy (a Hugging Face folder such as
            `.distrl/models/smollm2-135m-instruct` from `distrl pretrained`, adapted with LoRA);
            None: the tiny default. Later versions carry their base with them.
    """
    params = params or LearnerParams()
    logger = get_run_logger()
    if stop_token is None:  # a deployment's own process: DISTRL_LEARNER_THREADS, else torch's default
        logger.info("torch threads for the learner: %d", configure_threads("learner"))
        report_in_run_log()  # each retry of a store or server call: one line in the worker's output
    if bootstrap and PolicyRegistry().resolve("latest") is None:
        version = warm_start_policy(warm_start or WarmStartConfig(), policy_config_for(base))
        logger.info("empty registry: published the warm start as version %d", version)
    if params.publish_every_updates < params.updates_per_block:
        logger.info(
            "publishing every %d updates: blocks are cut to that size (updates_per_block=%d)",
            params.publish_every_updates,
            params.updates_per_block,
        )
    session = open_learner(params, replay)
    run = find_token(stop_token)
    if run is not None:  # the embedded run's progress display follows this learner
        run.attach(session)
    try:
        published = _train_until_stopped(session, stop_token)
        logger.info("learner stopped after %d updates; published %s", session.learner.updates, published)
    finally:
        if run is not None:
            run.detach(session)
        close_learner(session)
    return {
        "updates": session.learner.updates,
        "published": published,
        "samples_seen": session.samples_seen,
        "duty_cycle": session.duty_cycle,
    }


def _train_until_stopped(session: LearnerSession, stop_token: str | None) -> list[int]:
    """Ingest, train and publish until a bound or the stop token; the versions published."""
    params = session.params
    resumed_at = session.learner.updates  # a restart continues the count; max_updates bounds this run
    deadline = None if params.max_minutes is None else time.monotonic() + 60 * params.max_minutes
    progress = BoundedProgress("learner", params.max_updates, params.max_minutes, key="learn")
    since_publish = 0
    published: list[int] = []
    idle_log = _IdleLog(get_run_logger())
    while not should_stop(stop_token, deadline):
        if params.max_updates is not None and session.learner.updates - resumed_at >= params.max_updates:
            break
        # Plain calls, not task runs: while the learner waits for data this loop runs every
        # `idle_sleep_s`, and a task run per idle poll buried the real work in the UI.
        with_retries(lambda: ingest_shards.fn(session), "ingesting shards")
        waiting = replay_waiting(session)
        if waiting is None:
            metrics = train_block(session, _block_size(session, since_publish, resumed_at))
            since_publish += int(metrics["updates"])
            progress.update(session.learner.updates)
            if since_publish >= params.publish_every_updates:
                published.append(publish_policy(session))
                checkpoint_replay(session)
                since_publish = 0
            elif session.replay.checkpoint_pending:  # the store was full or down: retry once per block
                checkpoint_replay(session)
            if not metrics.get("waiting"):
                continue
        idle_log.waiting(session, waiting)
        time.sleep(params.idle_sleep_s)
    if since_publish:
        published.append(publish_policy(session))
    progress.update(session.learner.updates, done=True)
    return published


def _block_size(session: LearnerSession, since_publish: int, resumed_at: int = 0) -> int:
    """Updates of the next block: it ends where a publish is due (publish_every_updates is honoured
    exactly), and at max_updates of this run (a resumed learner's count starts at `resumed_at`)."""
    params = session.params
    updates = min(params.updates_per_block, params.publish_every_updates - since_publish)
    if params.max_updates is not None:
        updates = min(updates, params.max_updates - (session.learner.updates - resumed_at))
    return updates


class _IdleLog:
    """Says why the learner idles, at most every 30 s (not on every idle loop)."""

    def __init__(self, logger: logging.Logger | logging.LoggerAdapter[logging.Logger]) -> None:
        self.logger = logger
        self.last = 0.0

    def waiting(self, session: LearnerSession, reason: str | None) -> None:
        if time.monotonic() - self.last <= 30:
            return
        self.last = time.monotonic()
        self.logger.info(
            "replay not ready (%s): %d steps in %d episodes ingested so far",
            reason or "sample-to-insert ratio or no eligible trajectory",
            session.replay.size_steps,
            session.replay.episodes,
        )
