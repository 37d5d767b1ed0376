"""The `collect` flow: one collector of an agent pool, running until told to stop.

It never waits for the learner: between batches of episodes it polls the registry (one cheap
call) and swaps in a newer version when there is one. A crash loses at most the unflushed buffer.
"""

from __future__ import annotations

import time

from prefect import flow, get_run_logger

from distrl_core.policy.defaults import configure_threads
from tasks import sessions
from tasks.collector import (
    CollectorParams,
    CollectorSession,
    close_collector,
    collect_episode_batch,
    flush_shard,
    load_policy_version,
    open_collector,
    poll_policy_version,
)
from tasks.mlflow_metrics import log_metrics, with_retries
from tasks.stop import StopToken, should_stop


@flow(name="collect")
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
    session_id = open_collector(params)
    session = sessions.get(session_id, CollectorSession)
    run_id = with_retries(
        lambda: session.registry.start_run(
            f"collector-{params.pool}-{params.collector_id}", tags={"role": "collector", "pool": params.pool}
        ),
        "starting the collector's MLflow run",
    )
    deadline = None if params.max_minutes is None else time.monotonic() + 60 * params.max_minutes
    batches = 0
    try:
        while not should_stop(stop_token, deadline):
            if params.max_episodes is not None and session.episodes >= params.max_episodes:
                break
            version = poll_policy_version(session_id)
            if version is None:
                logger.info("no policy version yet for alias %r; waiting", params.policy_alias)
                time.sleep(2)
                continue
            if version != session.version:
                load_policy_version(session_id, version)
            stats = collect_episode_batch(session_id)
            batches += 1
            hours = (time.monotonic() - session.started) / 3600
            log_metrics(
                session.registry,
                run_id,
                {
                    "episodes_per_hour": session.episodes / max(hours, 1e-9),
                    "success_rate": stats["successes"] / max(1, stats["episodes"]),
                    "step_latency_ms": stats["mean_step_latency_ms"],
                    "policy_version": stats["policy_version"],
                    "broken_episodes": session.broken,
                },
                step=batches,
            )
        flush_shard(session_id)
    finally:
        close_collector(session_id)
        with_retries(
            lambda: session.registry.client.set_terminated(run_id), "closing the collector's MLflow run"
        )
    return {
        "episodes": session.episodes,
        "steps": session.steps,
        "successes": session.successes,
        "broken": session.broken,
    }


__all__ = ["StopToken", "collect"]
