"""Learner tasks: ingest new shards, train a block of updates, publish a version, persist priorities.

The replay (DuckDB) and the learner (model + optimisers) live in a `LearnerSession` in the flow's
process, handed to each task as its argument (the tasks use `cache_policy=NO_CACHE`, so Prefect
neither hashes nor stores it). A task run is a block of work a person wants to see and retry: one
ingest scan, K updates, one publish; never a single update.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from distrl_core.learner.config import LearnerConfig
from distrl_core.learner.learner import Learner, train_step
from distrl_core.policy import load_policy, save_policy
from storage.lease import Holder, LeaseLost, ReplayLease
from storage.registry import PolicyRegistry
from storage.replay import Replay, ReplayNotReady, SampleBatch
from storage.replay_config import ReplaySettings
from storage.store import Store, open_store
from tasks.block_log import BlockLog
from tasks.heldout_curve import ENV_STEPS_TAG, SECONDS_TAG
from tasks.learner_params import LearnerParams
from tasks.learner_ranks import LearnerRanks
from tasks.learner_timing import LearnerTiming
from tasks.mlflow_metrics import log_metrics, start_tracked_run
from tasks.retry import only_transient, with_retries

log = logging.getLogger(__name__)

# LearnerParams lives in tasks/learner_params.py; flows, benches and tests import it from here.
__all__ = [
    "LearnerParams",
    "LearnerSession",
    "LearnerTiming",
    "checkpoint_replay",
    "close_learner",
    "ingest_shards",
    "open_learner",
    "publish_policy",
    "replay_waiting",
    "train_block",
]


class LearnerSession:
    """A learner's replay, model and registry, open for the length of one flow run; its tasks
    take it as an argument.

    A plain class rather than a dataclass on purpose: Prefect walks a dataclass argument field by
    field looking for upstream results, while it takes this as one value.
    """

    def __init__(
        self,
        params: LearnerParams,
        replay: Replay,
        learner: Learner,
        registry: PolicyRegistry,
        run_id: str,
        version: int,
        *,
        clock: LearnerTiming | None = None,
        lease: ReplayLease | None = None,
        published_before: int | None = None,
    ) -> None:
        self.params = params
        self.replay = replay
        self.learner = learner
        self.registry = registry
        self.run_id = run_id  # the learner's MLflow run
        self.version = version  # the registry version its weights were last published as
        self.samples_seen = 0
        # The x-axes of the held-out curve (tasks/heldout_curve.py), written on every version:
        # wall-clock seconds since this learner started and environment steps it has ingested.
        self.started_at = time.time()
        self.env_steps = 0
        self.clock = clock or LearnerTiming()
        # The next batch, drawn while the current update runs.
        self.prefetch: Future[SampleBatch] | None = None
        self.sampler = ThreadPoolExecutor(1, thread_name_prefix="replay-prefetch")
        # The background scan (background_ingest), and the last finished scan's report.
        self.ingesting: Future[dict[str, int]] | None = None
        self.last_ingest: dict[str, int] = {}
        self.ingester = ThreadPoolExecutor(1, thread_name_prefix="replay-ingest")
        self.ranks: LearnerRanks | None = None  # the other learner processes (learner_processes > 1)
        self.lease = lease  # this learner's hold on its replay (storage/lease.py)
        # The newest version when this learner started: a version above it from our parent, by
        # another run, means two learners at once (`PolicyRegistry.publish` refuses then).
        self.published_before = published_before

    def check_lease(self) -> None:
        """Raise `LeaseLost` if another learner took this one's replay over (no I/O)."""
        if self.lease is not None:
            self.lease.check()

    @property
    def duty_cycle(self) -> float:
        return self.clock.duty_cycle

    def timing(self) -> dict[str, float]:
        """Where the learner's wall-clock went (`LearnerTiming.report`)."""
        return self.clock.report(self.learner.updates)


def open_learner(
    params: LearnerParams,
    replay_settings: ReplaySettings | None = None,
    *,
    start_version: int | None = None,
    config: LearnerConfig | None = None,
    role: str = "learner",
    run_tags: dict[str, str] | None = None,
) -> LearnerSession:
    """Resume from the newest published version (there must be one: warm start publishes version 1),
    or start from `start_version` (the `retrain` flow starts from `champion`).

    First takes the replay's lease (storage/lease.py): a second learner of the same replay waits
    for it, then refuses with `LeaseHeld`; the versions are resolved once it is held."""
    settings = replay_settings or ReplaySettings()
    store = open_store(params.store_uri)
    lease = ReplayLease(store, settings.learner_id, Holder.this_process(_flow_run_id())).acquire()
    try:
        session, tags = _open_session(params, settings, store, start_version, config, role, run_tags)
    except BaseException:
        lease.release()
        raise
    session.lease = lease
    if start_version is None:  # a restart, not a fine-tune that counts its own updates (retrain)
        _resume_counters(session, tags)
    if params.world > 1:
        try:
            session.ranks = LearnerRanks.start(
                session.learner, params.learner_processes, params.rank_network(), params.batch_size
            )
        except BaseException:
            close_learner(session)
            raise
    return session


def _open_session(
    params: LearnerParams,
    settings: ReplaySettings,
    store: Store,
    start_version: int | None,
    config: LearnerConfig | None,
    role: str,
    run_tags: dict[str, str] | None,
) -> tuple[LearnerSession, dict[str, str]]:
    """The session on `start_version` (else `latest`), and that version's tags."""
    registry = PolicyRegistry()
    newest = registry.resolve("latest")
    latest = start_version if start_version is not None else newest
    if latest is None:
        raise LookupError(
            "no policy version to resume from: publish a warm start first (the `learn` flow does it on an empty registry with bootstrap=True, as does `distrl demo`)"
        )
    fetched = registry.fetch(latest)
    policy = load_policy(fetched.path)
    config = config or params.to_learner_config()
    learner = Learner(policy, config, policy_version=latest)
    # A shard whose policy version the registry never published is quarantined, not trained on.
    replay = Replay(store, settings, newest_version=partial(registry.resolve, "latest"))
    replay.set_policy_version(latest)
    tags = {"role": role, "algorithm": config.algorithm, "parent_version": str(latest)} | (run_tags or {})
    run_id = start_tracked_run(registry, role, tags=tags, params=_params_for_mlflow(params, config))
    session = LearnerSession(params, replay, learner, registry, run_id, latest, published_before=newest)
    return session, fetched.tags


def _flow_run_id() -> str:
    """The Prefect flow run that holds the lease (what a person looks up), or `none` outside one."""
    from prefect.runtime import flow_run

    return str(flow_run.id or "none")


def _resume_counters(session: LearnerSession, tags: dict[str, str]) -> None:
    """Continue the step and sample counts the resumed version was published with: β annealing and
    the critic warm-up run on `learner.updates`, and would otherwise start over at every restart."""
    try:
        session.learner.updates = int(tags.get("learner_step", 0))
        session.samples_seen = int(tags.get("samples_seen", 0))
    except ValueError:
        log.warning("version %d has unreadable counter tags %s; counting from 0", session.version, tags)


def _params_for_mlflow(params: LearnerParams, config: LearnerConfig) -> dict[str, object]:
    values = {f"learner.{k}": v for k, v in config.to_dict().items()}
    # learner_config is in `learner.*` already, field by field.
    flow = params.model_dump(exclude={"store_uri", "learner_config"})
    return values | {f"flow.{k}": v for k, v in flow.items()}


def close_learner(session: LearnerSession) -> None:
    if session.ranks is not None:
        session.ranks.close()
    session.sampler.shutdown(wait=True, cancel_futures=True)
    session.ingester.shutdown(wait=True, cancel_futures=True)
    try:
        session.check_lease()
        session.replay.try_checkpoint()  # a full disk loses the priorities since the last one, not the run
    except LeaseLost as exc:  # the snapshot belongs to the learner that took the replay over
        log.error("%s", exc)
    session.replay.close()
    try:
        with_retries(
            lambda: session.registry.client.set_terminated(session.run_id), "closing the learner's run"
        )
    finally:
        if session.lease is not None:
            session.lease.release()


@task(
    retries=3,
    retry_delay_seconds=2,
    retry_condition_fn=only_transient,
    cache_policy=NO_CACHE,
    task_run_name="ingest shards",
)
def ingest_shards(session: LearnerSession) -> dict[str, int]:
    """Ingest shards written since the last scan (bad ones are quarantined); with `background_ingest`,
    start a scan unless one is running, and report the last finished one (its error, if it failed)."""
    replay = session.replay
    if not session.params.background_ingest:
        report = _ingest(session, background=False)
        return report | {"replay_steps": replay.size_steps, "replay_episodes": replay.episodes}
    running = session.ingesting
    report = session.last_ingest
    if running is None or running.done():
        session.ingesting = None
        if running is not None:
            report = running.result()  # a failed scan fails this task run (and its retries)
        session.ingesting = session.ingester.submit(_ingest, session, True)
    # No episode count here: it would wait for the lock that the running scan holds.
    return report | {"replay_steps": replay.size_steps}


def _train_block_name() -> str:
    from prefect.runtime import task_run

    params = task_run.get_parameters()
    session: LearnerSession = params["session"]
    first = session.learner.updates + 1
    count = params.get("updates") or session.params.updates_per_block
    # An ASCII hyphen: the Prefect timeline draws printable ASCII only ("105–112" showed as "105112").
    return f"train_block {first}-{first + count - 1}"


def replay_waiting(session: LearnerSession) -> str | None:
    """Why the replay cannot give a batch now, or None when it can (the batch drawn to find out is
    kept for the next update). A plain call: the learner polls it while idle, and an idle poll is
    not something to see or retry in the UI."""
    if session.prefetch is not None:
        return None
    try:
        batch = _draw(session)
    except ReplayNotReady as exc:
        return exc.reason
    session.prefetch = Future()
    session.prefetch.set_result(batch)
    return None


@task(cache_policy=NO_CACHE, task_run_name=_train_block_name)
def train_block(session: LearnerSession, updates: int | None = None) -> dict[str, float]:
    """Up to `updates` updates (default `updates_per_block`); stops early (status 'waiting') when
    the replay is not ready."""
    replay, learner = session.replay, session.learner
    sample: Callable[[], SampleBatch] = partial(_next_draw, session)
    # On several ranks the followers train on their shards of the same draw; a lost rank is recovered.
    step_on = partial(train_step, learner) if session.ranks is None else session.ranks.train_step
    done = 0
    metrics: dict[str, float] = {}
    block = BlockLog(learner.updates + 1)
    for _ in range(updates or session.params.updates_per_block):
        session.check_lease()  # a learner whose replay was taken over stops within one update
        try:
            step = step_on(sample, replay.update_priorities)
        except ReplayNotReady as exc:
            block.say(done, replay.size_steps)
            return {"updates": done, "waiting": 1.0, **metrics} | {
                "reason_code": 1.0 if "min_size" in exc.reason else 2.0
            }
        session.clock.busy_s += step.update_s
        session.samples_seen += step.steps
        metrics = step.metrics
        block.add(metrics)
        done += 1
    block.say(done, replay.size_steps)
    metrics = {k: float(v) for k, v in metrics.items()} | {
        "updates": float(done),
        "learner_updates_total": float(learner.updates),
        "replay_steps": float(replay.size_steps),
        "samples_seen": float(session.samples_seen),
        "learner_duty_cycle": session.duty_cycle,
        "waiting": 0.0,
    }
    log_metrics(session.registry, session.run_id, metrics, step=learner.updates)
    return metrics


def _ingest(session: LearnerSession, background: bool) -> dict[str, int]:
    started = time.perf_counter()
    report = session.replay.ingest().__dict__
    session.env_steps += int(report.get("steps", 0))
    if background:
        session.clock.background_ingest_s += time.perf_counter() - started
    else:
        session.clock.ingest_s += time.perf_counter() - started
    session.last_ingest = report
    return report


def _draw(session: LearnerSession) -> SampleBatch:
    params = session.params
    return session.replay.sample(params.batch_size, beta=session.learner.beta_at(), window=params.window)


def _next_draw(session: LearnerSession) -> SampleBatch:
    """The prefetched batch, or a fresh draw (the learner's wait for it counts as sampling time);
    the one after it starts drawing now."""
    pending, session.prefetch = session.prefetch, None
    waiting = time.perf_counter()
    try:
        batch = pending.result() if pending is not None else _draw(session)
    finally:
        session.clock.sample_s += time.perf_counter() - waiting
    if session.clock.first_update_at is None:
        session.clock.first_update_at = time.monotonic()
    # Draw the next batch while this one trains (the replay is thread-safe): the learner does
    # not wait on DuckDB, at the price of priorities one update stale, as in Ape-X's learner.
    session.prefetch = session.sampler.submit(_draw, session)
    return batch


def _publish_name() -> str:
    from prefect.runtime import task_run

    session: LearnerSession = task_run.get_parameters()["session"]
    try:  # the number the registry will give, unless another learner publishes meanwhile
        return f"publish v{(session.registry.resolve('latest') or 0) + 1}"
    except Exception:
        return f"publish after update {session.learner.updates}"


@task(
    retries=3,
    retry_delay_seconds=2,
    retry_condition_fn=only_transient,
    cache_policy=NO_CACHE,
    task_run_name=_publish_name,
)
def publish_policy(session: LearnerSession) -> int:
    """Save the current weights as a new registry version and point the learner and replay at it."""
    started = time.perf_counter()
    session.check_lease()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "policy"
        with (
            session.learner.averaged() as policy
        ):  # the averaged weights (LearnerConfig.weight_average_decay)
            save_policy(policy, path)
        version = session.registry.publish(
            path,
            run_id=session.run_id,
            tags={
                "learner_step": session.learner.updates,
                "samples_seen": session.samples_seen,
                "replay_size": session.replay.size_steps,
                "algorithm": session.params.algorithm,
                "parent_version": session.version,  # the version these weights were trained from
                SECONDS_TAG: f"{time.time() - session.started_at:.3f}",
                ENV_STEPS_TAG: session.env_steps,
            },
            siblings_after=session.published_before,
        )
    session.version = version
    session.learner.policy_version = version
    session.replay.set_policy_version(version)
    session.clock.publish_s += time.perf_counter() - started
    log.info("published version %d after %d updates", version, session.learner.updates)
    return version


@task(
    retries=3,
    retry_delay_seconds=2,
    retry_condition_fn=only_transient,
    cache_policy=NO_CACHE,
    task_run_name="checkpoint priorities",
)
def checkpoint_replay(session: LearnerSession) -> str | None:
    """Persist trajectory priorities to the store (a restarted learner resumes them); None if the
    store cannot take them now (one warning line; `learn` retries after its next block)."""
    started = time.perf_counter()
    session.check_lease()
    stored = session.replay.try_checkpoint()
    session.clock.publish_s += time.perf_counter() - started
    return session.replay.store.url(session.replay.snapshot_path) if stored else None
