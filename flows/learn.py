"""The `learn` flow: ingest, sample, update, write priorities back, publish every K updates.

It resumes from the newest published version and from the priorities persisted in the store, so
a crashed learner loses at most the updates since its last publish.
"""

from __future__ import annotations

import time

from prefect import flow, get_run_logger

from storage.replay_config import ReplaySettings
from tasks import sessions
from tasks.learner import (
    LearnerParams,
    LearnerSession,
    checkpoint_replay,
    close_learner,
    ingest_shards,
    open_learner,
    publish_policy,
    train_block,
)
from tasks.stop import should_stop


@flow(name="learn")
def learn(
    params: LearnerParams | None = None, replay: ReplaySettings | None = None, stop_token: str | None = None
) -> dict[str, float]:
    params = params or LearnerParams()
    logger = get_run_logger()
    session_id = open_learner(params, replay)
    session = sessions.get(session_id, LearnerSession)
    deadline = None if params.max_minutes is None else time.monotonic() + 60 * params.max_minutes
    since_publish = 0
    published = []
    try:
        while not should_stop(stop_token, deadline):
            if params.max_updates is not None and session.learner.updates >= params.max_updates:
                break
            ingest_shards(session_id)
            metrics = train_block(session_id)
            since_publish += int(metrics["updates"])
            if since_publish >= params.publish_every_updates:
                published.append(publish_policy(session_id))
                checkpoint_replay(session_id)
                since_publish = 0
            if metrics.get("waiting"):
                time.sleep(params.idle_sleep_s)
        if since_publish:
            published.append(publish_policy(session_id))
        logger.info("learner stopped after %d updates; published %s", session.learner.updates, published)
    finally:
        close_learner(session_id)
    return {
        "updates": session.learner.updates,
        "published": published,
        "samples_seen": session.samples_seen,
        "duty_cycle": session.duty_cycle,
    }
