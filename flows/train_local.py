"""`train_local`: the embedded default — warm start, then collectors and the learner at once.

Everything runs in this process: collectors and the learner are flow runs in threads (async, as
DistRL), or, with `sync=True`, rounds in which every collector finishes its batch and the learner
trains while they wait (DigiRL's multi-machine scheme), for comparison.
"""

from __future__ import annotations

import threading
import time

from prefect import flow, get_run_logger
from pydantic import BaseModel, Field

from distrl_core.learner.warm_start import WarmStartConfig
from flows.collect import collect
from flows.learn import learn
from storage.registry import PolicyRegistry
from storage.replay_config import ReplaySettings
from tasks import sessions
from tasks.collector import (
    CollectorParams,
    CollectorSession,
    close_collector,
    collect_episode_batch,
    flush_shard,
    load_policy_version,
    open_collector,
)
from tasks.evaluation import evaluate_version, record_evaluation
from tasks.learner import (
    LearnerParams,
    LearnerSession,
    close_learner,
    ingest_shards,
    open_learner,
    publish_policy,
    train_block,
)
from tasks.progress import ProgressMonitor
from tasks.stop import StopToken
from tasks.warm_start import warm_start_policy


class TrainLocalParams(BaseModel):
    """Parameters of the embedded run (every field has a demo-sized default)."""

    collectors: int = Field(4, ge=1, description="Collector threads (two agent pools, alternating).")
    envs_per_collector: int = Field(4, ge=1, description="SimDroid environments per collector.")
    minutes: float = Field(6.0, gt=0, description="Wall-clock budget of the RL phase.")
    family: str | None = Field("general", description="Task family trained and evaluated (None: both).")
    sync: bool = Field(False, description="DigiRL-style barrier rounds instead of asynchronous collection.")
    learner: LearnerParams = Field(default_factory=LearnerParams)
    replay: ReplaySettings = Field(
        default_factory=lambda: ReplaySettings(min_size_steps=200, samples_per_insert=None)
    )
    step_latency_s: float = Field(
        0.05,
        ge=0,
        description="Emulator-like median step latency of SimDroid (sleeps; frees CPU for the learner).",
    )
    store_uri: str | None = Field(None, description="Trajectory store (default: DISTRL_STORE_URI).")
    warm_start_updates: int = Field(
        60, ge=0, description="SFT updates of the warm start (when no version exists)."
    )
    warm_start_noise: float = Field(
        0.3, ge=0, le=1, description="Noise of the scripted expert's demonstrations."
    )
    evaluate: bool = Field(
        True, description="Evaluate the warm start and the final version on the held-out split."
    )
    seed: int = 0


def _collector_params(params: TrainLocalParams, index: int) -> CollectorParams:
    return CollectorParams(
        pool=f"pool_{'ab'[index % 2]}",
        collector_id=f"c{index}",
        num_envs=params.envs_per_collector,
        episodes_per_batch=params.envs_per_collector,
        family=params.family,
        store_uri=params.store_uri,
        flush_episodes=params.envs_per_collector * 2,
        flush_seconds=10,
        seed=params.seed * 1000 + index,
        step_latency_s=params.step_latency_s,
    )


@flow(name="train_local")
def train_local(params: TrainLocalParams | None = None, show_progress: bool = True) -> dict:
    params = params or TrainLocalParams()
    logger = get_run_logger()
    registry = PolicyRegistry()
    warm = registry.resolve("latest")
    if warm is None:
        warm = warm_start_policy(
            WarmStartConfig(
                family=params.family, updates=params.warm_start_updates, noise=params.warm_start_noise
            )
        )
        logger.info("warm start published as version %d", warm)
    baseline = evaluate_version(warm, family=params.family) if params.evaluate else None
    if baseline is not None:
        record_evaluation(baseline)
    learner_params = params.learner.model_copy(
        update={"max_minutes": params.minutes, "store_uri": params.store_uri}
    )
    monitor = ProgressMonitor(enabled=show_progress)
    started = time.monotonic()
    with monitor:
        outcome = _run_sync(params, learner_params) if params.sync else _run_async(params, learner_params)
    final = registry.resolve("latest")
    report = evaluate_version(final, family=params.family) if params.evaluate else None
    if report is not None:
        report["promoted"] = record_evaluation(report)
    return {
        "mode": "sync" if params.sync else "async",
        "seconds": time.monotonic() - started,
        "history": [sample.__dict__ for sample in monitor.history],
        "warm_start": baseline,
        "final": report,
        **outcome,
    }


def _run_async(params: TrainLocalParams, learner_params: LearnerParams) -> dict:
    stop = StopToken()
    results: dict[str, object] = {}
    threads = [
        threading.Thread(
            target=lambda i=i: results.__setitem__(
                f"collector_{i}",
                collect(
                    _collector_params(params, i).model_copy(update={"max_minutes": params.minutes}), stop.id
                ),
            ),
            name=f"collector-{i}",
        )
        for i in range(params.collectors)
    ]
    for thread in threads:
        thread.start()
    # Starting a flow run takes seconds under load: let every collector open before the clock of
    # the learner starts, so that a short run still hears from all of them.
    deadline = time.monotonic() + 120
    while len(sessions.all_of(CollectorSession)) < params.collectors and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        results["learner"] = learn(learner_params, params.replay, stop.id)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        stop.close()
    return results


def _run_sync(params: TrainLocalParams, learner_params: LearnerParams) -> dict:
    """Barrier rounds: all collectors run a batch, then the learner trains while they wait."""
    collector_ids = [open_collector(_collector_params(params, i)) for i in range(params.collectors)]
    learner_id = open_learner(learner_params, params.replay)
    learner = sessions.get(learner_id, LearnerSession)
    deadline = time.monotonic() + 60 * params.minutes
    rounds, waiting_s = 0, 0.0
    try:
        while time.monotonic() < deadline:
            for cid in collector_ids:
                load_policy_version(cid, learner.version)
            batch_started = time.monotonic()
            threads = [threading.Thread(target=collect_episode_batch, args=(cid,)) for cid in collector_ids]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            for cid in collector_ids:
                flush_shard(cid)
            waiting_s += time.monotonic() - batch_started  # the learner idles during collection
            ingest_shards(learner_id)
            for _ in range(max(1, learner_params.publish_every_updates // learner_params.updates_per_block)):
                train_block(learner_id)
            publish_policy(learner_id)
            rounds += 1
    finally:
        for cid in collector_ids:
            close_collector(cid)
        close_learner(learner_id)
    return {"rounds": rounds, "learner_idle_s": waiting_s, "learner": {"updates": learner.learner.updates}}
