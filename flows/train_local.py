"""`train_local`: the embedded default — warm start, then collectors and the learner at once.

Everything runs in this process: collectors and the learner are flow runs in threads (async, as
DistRL), or, with `sync=True`, rounds in which every collector finishes its batch and the learner
trains while they wait (DigiRL's multi-machine scheme), for comparison.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from prefect import flow, get_run_logger

from distrl_core.policy.config import policy_config_for
from distrl_core.policy.pretrained import is_vision_folder
from flows.collect import collect
from flows.embedded_evaluator import start_embedded_evaluator
from flows.learn import learn
from flows.train_local_params import TrainLocalParams, evaluator_params, trained_split
from flows.train_local_report import evaluator_summary, final_report, heldout_curve
from simulators.warm_start import WarmStartConfig
from storage.registry import PolicyRegistry
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
    close_learner,
    ingest_shards,
    open_learner,
    publish_policy,
    train_block,
)
from tasks.progress import ProgressMonitor
from tasks.stop import StopToken, signalled
from tasks.warm_start import warm_start_policy

log = logging.getLogger(__name__)


def _collector_params(params: TrainLocalParams, index: int) -> CollectorParams:
    return CollectorParams(
        pool=f"pool_{'ab'[index % 2]}",
        collector_id=f"c{index}",
        num_envs=params.envs_per_collector,
        episodes_per_batch=params.envs_per_collector,
        family=params.family,
        split=trained_split(params),
        store_uri=params.store_uri,
        # a vision-language base reads the screenshot of every stored step (the learner re-scores them)
        screenshots=params.base is not None and is_vision_folder(params.base),
        flush_episodes=params.envs_per_collector * 2,
        flush_seconds=10,
        seed=params.seed * 1000 + index,
        step_latency_s=params.step_latency_s,
        task_latency_sigma=params.task_latency_sigma,
        observation=params.observation,
        paraphrase=params.paraphrase,
        # One batch per task run: in one process a new version reaches the collectors a batch
        # later, not a ~20 s task run later (the policy lag the demo's results were measured with).
        task_run_seconds=0.0,
    )


def warm_start_config(params: TrainLocalParams) -> WarmStartConfig:
    """The warm start of a run: on its trained split, observed as its collectors observe."""
    return WarmStartConfig(
        family=params.family,
        split=trained_split(params),
        updates=params.warm_start_updates,
        noise=params.warm_start_noise,
        seed=params.seed,
        observation=params.observation,
        paraphrase=params.paraphrase,
    )


@flow(name="train_local")
def train_local(params: TrainLocalParams | None = None, show_progress: bool = True) -> dict:
    params = params or TrainLocalParams()
    logger = get_run_logger()
    registry = PolicyRegistry()
    warm = registry.resolve("latest")
    if warm is None:
        warm = warm_start_policy(
            warm_start_config(params),
            policy_config_for(
                params.base,
                params.seed,
                trained_split(params),
                params.encoder_layers,
                params.encoder_candidates,
            ),
        )
        logger.info("warm start published as version %d", warm)
    protocol = evaluator_params(params)
    baseline = evaluate_version(warm, **protocol.evaluation_args()) if params.evaluate else None
    if baseline is not None:
        # Not on a curve of its own: the evaluator puts it at the start of the learner's curve.
        record_evaluation(baseline, add_to_curve=False)
    learner_params = params.learner.model_copy(
        update={"max_minutes": params.minutes, "store_uri": params.store_uri, "seed": params.seed}
        | ({"background_ingest": False} if params.sync else {})
    )
    # The run's handle: its stop flag, and the sessions (opened by its flow runs) the monitor reads.
    run = StopToken()
    monitor = ProgressMonitor(run, enabled=show_progress)
    started = time.monotonic()
    scores = (
        start_embedded_evaluator(
            protocol, run.id, nice=params.evaluator_nice, in_process=not params.evaluator_process
        )
        if params.evaluate
        else None
    )
    unwinding = True
    try:
        with monitor:
            run_phase = _run_sync if params.sync else _run_async
            outcome = run_phase(params, learner_params, run)
        unwinding = False
    finally:
        run.set()  # the evaluator scores the last version, then stops
        # Unwinding (an error, or SIGTERM: Prefect's handler raises in this flow before ours sees
        # the signal, so `signalled()` is not yet set): stop the evaluator now. A last evaluation
        # at niceness 19 on a busy machine would hold the exit for minutes.
        evaluated = scores.finish(abort=unwinding) if scores is not None else None
        run.close()
    final = registry.resolve("latest") or warm  # there is one: the warm start at least
    # Stopped by SIGTERM or Ctrl-C: exit within seconds, not after an evaluation.
    report = None if signalled() else final_report(final, baseline, evaluated, protocol)
    return {
        "mode": "sync" if params.sync else "async",
        "seconds": time.monotonic() - started,
        "history": [sample.__dict__ for sample in monitor.history],
        "warm_start": baseline,
        "final": report,
        "evaluator": evaluator_summary(evaluated),
        "heldout_curve": (
            heldout_curve(registry, final, protocol) if params.evaluate and final != warm else []
        ),
        **outcome,
    }


def _run_async(params: TrainLocalParams, learner_params: LearnerParams, stop: StopToken) -> dict[str, Any]:
    results: dict[str, Any] = {}
    threads = [
        threading.Thread(
            target=_collector_thread,
            args=(
                # The stop token ends the collectors with the learner; their own limit is only a
                # safety net, and must not end them first: the learner's clock starts after the barrier.
                _collector_params(params, i).model_copy(update={"max_minutes": params.minutes + 5}),
                stop,
                results,
            ),
            name=f"collector-{i}",
        )
        for i in range(params.collectors)
    ]
    for thread in threads:
        thread.start()
        time.sleep(0.2)  # a burst of flow-run creations can make a loaded local API answer 503
    # Starting a flow run takes seconds under load: let every collector open before the clock of
    # the learner starts, so that a short run still hears from all of them.
    deadline = time.monotonic() + 120
    while len(stop.open_sessions(CollectorSession)) < params.collectors and time.monotonic() < deadline:
        time.sleep(0.2)
    results["rl_started_at"] = time.time()  # the learner's clock: the same budget as a sync run
    try:
        results["learner"] = learn(learner_params, params.replay, stop.id)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    return results


def _collector_thread(
    params: CollectorParams,
    stop: StopToken,
    results: dict[str, Any],
    attempts: int = 3,
    backoff_s: float = 2.0,
) -> None:
    """One collector flow run; started again if it fails while the run goes on (as a worker would),
    after ``backoff_s`` x the attempt number, or at once when the run stops meanwhile."""
    for attempt in range(1, attempts + 1):
        try:
            # A restart draws new episode ids: the same seed would repeat those already written.
            run_params = (
                params if attempt == 1 else params.model_copy(update={"seed": params.seed + 7919 * attempt})
            )
            results[f"collector_{params.collector_id}"] = collect(run_params, stop.id)
            return
        except Exception as exc:
            if stop.event.is_set() or attempt == attempts:
                raise
            log.warning(
                "collector %s failed (%s); starting it again (%d/%d)",
                params.collector_id,
                exc,
                attempt,
                attempts,
            )
            stop.event.wait(backoff_s * attempt)


def _end_episodes_at(collectors: list[CollectorSession], deadline: float) -> None:
    """The last round ends with the budget, its unfinished episodes dropped, as an async collector
    ends on the stop token: a round under the heavy tail can otherwise run minutes past it."""
    for collector in collectors:
        collector.should_stop = lambda: time.monotonic() >= deadline


def _run_sync(params: TrainLocalParams, learner_params: LearnerParams, run: StopToken) -> dict[str, Any]:
    """Barrier rounds: all collectors run a batch, then the learner trains while they wait."""
    collectors = [open_collector(_collector_params(params, i)) for i in range(params.collectors)]
    rl_started_at = time.time()
    learner = open_learner(learner_params, params.replay)
    for session in (*collectors, learner):
        run.attach(session)
    deadline = time.monotonic() + 60 * params.minutes
    _end_episodes_at(collectors, deadline)
    rounds, waiting_s = 0, 0.0

    def collector_round(collector: CollectorSession, version: int) -> None:
        # Each collector loads the new version itself, as the async collectors do.
        if collector.version != version:
            load_policy_version(collector, version)
        collect_episode_batch(collector)
        flush_shard(collector)

    try:
        while time.monotonic() < deadline:
            batch_started = time.monotonic()
            threads = [
                threading.Thread(target=collector_round, args=(collector, learner.version))
                for collector in collectors
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            waiting_s += time.monotonic() - batch_started  # the learner idles during collection
            ingest_shards(learner)
            for _ in range(max(1, learner_params.publish_every_updates // learner_params.updates_per_block)):
                train_block(learner)
            publish_policy(learner)
            rounds += 1
        timing = learner.timing()
    finally:
        for session in (*collectors, learner):
            run.detach(session)
        for collector in collectors:
            close_collector(collector)
        close_learner(learner)
    return {
        "rounds": rounds,
        "learner_idle_s": waiting_s,
        "rl_started_at": rl_started_at,
        "learner": {"updates": learner.learner.updates, **timing},
    }
