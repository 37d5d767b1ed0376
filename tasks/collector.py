"""Collector tasks: follow the newest policy, run batches of episodes, write them as shards.

Each task does one thing a person may want to see or retry in the Prefect UI: load a policy
version, run some batches of episodes (appended to the collector's shard buffer), flush the
buffer. A task run spans ~`task_run_seconds` of batches, not one batch: a task run per batch was
~1 per second per collector, a line of dust in the UI and a write load that locked the Prefect
server's SQLite. The collector's environments, policy and buffer live in a `CollectorSession` in
the flow's process, handed to each task as its argument; tasks return only version numbers and
small stats.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from pydantic import BaseModel, Field, model_validator

from distrl_core.envs.kinds import EnvKind
from distrl_core.envs.screen import ObservationKind
from distrl_core.policy import Policy
from simulators.rollout import RolloutConfig, run_episodes
from simulators.sim_env import SimDroidEnv
from simulators.simdroid.paraphrase import paraphrase_tasks
from simulators.simdroid.tasks import load_tasks
from simulators.warm_start import TRAIN_SETS
from storage.registry import MANIFEST_TAG, PolicyRegistry
from storage.schema import steps_to_table
from storage.shards import ShardFlushError, ShardWriter, ShardWriterConfig
from storage.store import open_store
from tasks.bounds import (
    MAX_BATCH,
    MAX_MINUTES,
    MAX_SECONDS,
    MAX_SEED,
    MAX_THREADS,
    MAX_UPDATES,
    Family,
    Split,
)
from tasks.collector_envs import make_collector_envs
from tasks.mlflow_metrics import queue_metrics
from tasks.policy_cache import templates
from tasks.retry import only_transient, with_retries
from tasks.stop import should_stop

log = logging.getLogger(__name__)
ROLLING_EPISODES = 64  # window of the rolling success rate (a per-batch rate of 8 episodes is noise)
# How long a stopping collector keeps retrying its last flush (a full disk, a store that is down)
# before it gives up on its buffer: long enough for a person to free space.
FINAL_FLUSH_WAIT_S = 300.0


class CollectorParams(BaseModel):
    """Everything one collector needs; the parameters of the `collect` deployment."""

    pool: str = Field("sim", description="Agent pool (shard partition and Prefect work pool).")
    collector_id: str = Field("c0", description="Collector name, unique within the pool.")
    env_kind: EnvKind = Field("sim", description="'sim' (SimDroid) or 'adb' (devices behind an ADB server).")
    num_envs: int = Field(
        4, ge=1, le=MAX_THREADS, description="Simulated environments stepped together (env_kind='sim')."
    )
    serials: list[str] = Field(default_factory=list, description="Device serials (env_kind='adb').")
    adb_host: str = Field("127.0.0.1", description="ADB server host (env_kind='adb').")
    adb_port: int = Field(5037, ge=1, le=65535, description="ADB server port (env_kind='adb').")
    adb_fake_server: bool = Field(
        False,
        description="The ADB server is `distrl fake-adb` (tasks are loaded and checked through its simdroid "
        "shell commands); otherwise real devices, reset to HOME and scored by rule checks.",
    )
    family: Family | None = Field(None, description="Task family to train on (None: all).")
    split: Split = Field(
        "train",
        description="Task split the collector samples from, or a selection carved from train "
        "('fit_words': train less the validation_words tasks; see load_tasks).",
    )
    policy_alias: str = Field("latest", description="Registry alias (or version) the collector follows.")
    episodes_per_batch: int = Field(
        8, ge=1, le=MAX_BATCH, description="Episodes stepped together between policy polls."
    )
    task_run_seconds: float = Field(
        20.0,
        ge=0,
        le=MAX_SECONDS,
        description="Batches per task run are chosen so a task run lasts about this long (0: one batch "
        "per task run); the collector swaps in a new policy version between task runs.",
    )
    max_episodes: int | None = Field(
        None, ge=1, le=MAX_UPDATES, description="Stop after this many episodes (None: no limit)."
    )
    max_minutes: float | None = Field(
        None,
        gt=0,
        le=MAX_MINUTES,
        description="Stop after this many minutes of collecting, counted from the first policy version "
        "(the wait for it is not part of them; None: no limit).",
    )
    max_wait_minutes: float | None = Field(
        None,
        gt=0,
        le=MAX_MINUTES,
        description="Fail, saying so, if the followed alias still points at no version after this many "
        "minutes (None: wait until one is published or the run is cancelled).",
    )
    flush_episodes: int = Field(16, ge=1, le=MAX_BATCH, description="Episodes per shard.")
    flush_seconds: float = Field(
        30.0, ge=0, le=MAX_SECONDS, description="Flush a partial shard at least this often."
    )
    store_uri: str | None = Field(None, description="Trajectory store (default: DISTRL_STORE_URI).")
    step_latency_s: float = Field(
        0.0,
        ge=0,
        le=MAX_SECONDS,
        description="SimDroid only: median emulator-like step latency (heavy-tailed); 0 = none.",
    )
    task_latency_sigma: float = Field(
        0.0,
        ge=0,
        le=10,
        description="SimDroid only: each episode scales the step latency by a lognormal factor of this shape "
        "(emulator task durations vary ~100x; 1.0 spans 100x between the 1st and 99th percentiles); 0 = none.",
    )
    screenshots: bool = Field(
        False,
        description="Store each step's PNG screenshot in the shards (`screenshot_png`), as a vision policy "
        "needs: ~100x larger shards (SimDroid and ADB environments alike).",
    )
    observation: ObservationKind = Field(
        "tree",
        description="'tree': the policy reads the UI dump's elements; 'screen': an OCR of the screenshot "
        "alone (needs `make pretrained-deps`; SimDroid then draws readable screenshots).",
    )
    seed: int = Field(0, ge=0, le=MAX_SEED, description="Seeds task sampling and episode randomness.")
    paraphrase: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Probability that an episode's instruction is replaced by a paraphrase (another "
        "phrasing the free-text parser reads as the same task: simulators.simdroid.paraphrase); the task's "
        "params, and so its success rules, stay. Only on a train split (train, fit, fit_words, fit_unseen).",
    )

    @model_validator(mode="after")
    def _paraphrase_trains_only(self) -> CollectorParams:
        if self.paraphrase > 0 and self.split not in TRAIN_SETS:
            raise ValueError(
                f"paraphrase={self.paraphrase} rephrases training episodes only: split {self.split!r} is held "
                f"out (use one of {TRAIN_SETS}, or paraphrase=0)"
            )
        return self


class CollectorSession:
    """A collector's environments, policy and shard buffer, open for the length of one flow run; its
    tasks take it as an argument (a plain class, as `LearnerSession`: Prefect takes it as one value)."""

    def __init__(
        self,
        params: CollectorParams,
        writer: ShardWriter,
        registry: PolicyRegistry,
        envs: list[Any],
        rng: random.Random | None = None,
    ) -> None:
        # Unique per opening, recorded as the `run_id` of every row the collector writes.
        self.id = f"collector-{params.pool}-{params.collector_id}-{uuid.uuid4().hex[:10]}"
        self.params = params
        self.writer = writer
        self.registry = registry
        self.envs = envs
        self.rng = rng or random.Random()
        self.policy: Policy | None = None
        self.version: int | None = None
        self.episodes = 0
        self.steps = 0
        self.successes = 0
        self.broken = 0
        self.started = time.monotonic()
        self.recent: deque[bool] = deque(maxlen=ROLLING_EPISODES)  # last outcomes
        self.mlflow_run_id: str | None = None  # the collector's MLflow run (metrics per batch), if any
        # Asked before every environment step (the flow sets it from its stop token and deadline):
        # a stopping collector drops its unfinished episodes instead of running the batch out.
        self.should_stop: Callable[[], bool] = lambda: False
        self.abandoned = 0  # episodes cut off unfinished by a stop (never stored)

    @property
    def rolling_success(self) -> float:
        return sum(self.recent) / len(self.recent) if self.recent else 0.0


def open_collector(params: CollectorParams) -> CollectorSession:
    if params.env_kind == "adb" and not params.serials:
        raise ValueError("env_kind='adb' needs serials=[...] (see `adb devices`)")
    store = open_store(params.store_uri)
    writer = ShardWriter(
        store,
        ShardWriterConfig(
            pool=params.pool,
            collector_id=params.collector_id,
            flush_episodes=params.flush_episodes,
            flush_seconds=params.flush_seconds,
        ),
    )
    rng = random.Random(params.seed)
    return CollectorSession(params, writer, PolicyRegistry(), make_collector_envs(params, rng), rng=rng)


def close_collector(session: CollectorSession) -> None:
    session.writer.close()


def interrupt_waits_on(session: CollectorSession, event: threading.Event) -> None:
    """Let `event` cut the simulated emulator waits of the session's environments short, so a
    stopping embedded run does not sit out a simulated hang (real devices have no such wait)."""
    for env in session.envs:
        if isinstance(env, SimDroidEnv):
            env.device.faults.interrupt = event


def poll_policy_version(session: CollectorSession) -> int | None:
    """The version the followed alias points at now (one cheap registry call).

    Deliberately not a task run: it happens before every batch, nobody needs to see or retry it on
    its own, and as a task it doubled a collector's task runs, which a SQLite-backed Prefect server
    answered with 503s under load. Swapping a version in (`load_policy_version`) stays a task.
    """
    return with_retries(lambda: session.registry.resolve(session.params.policy_alias), "polling the registry")


@task(
    retries=3,
    retry_delay_seconds=2,
    retry_condition_fn=only_transient,
    cache_policy=NO_CACHE,
    task_run_name="load v{version}",
)
def load_policy_version(session: CollectorSession, version: int) -> int:
    """Fetch a version (cached locally) and swap it in; episodes already running are not touched.
    The version is built once per process and copied for each collector (`tasks.policy_cache`)."""
    fetched = session.registry.fetch(version)
    session.policy = templates.copy_of(fetched.path, fetched.tags.get(MANIFEST_TAG))
    session.version = version
    log.info("collector %s now acts with version %d", session.params.collector_id, version)
    return version


@task(cache_policy=NO_CACHE, task_run_name="collect one batch")
def collect_episode_batch(session: CollectorSession) -> dict[str, float]:
    """Run one batch of episodes with the current policy and buffer them for the next shard."""
    return run_batch(session)


def _collect_run_name() -> str:
    from prefect.runtime import task_run

    params = task_run.get_parameters()
    session: CollectorSession = params["session"]
    return f"collect {params['batches'] * session.params.episodes_per_batch} episodes (v{session.version})"


@task(cache_policy=NO_CACHE, task_run_name=_collect_run_name)
def collect_episodes(
    session: CollectorSession, batches: int, stop_token: str | None = None
) -> dict[str, float]:
    """`batches` batches with the current policy, as the task run's name says (fewer only when the
    session is told to stop, which also ends the batch running then); a version published
    meanwhile is swapped in by the flow after this task run. One log line and one MLflow metrics
    row per batch (queued: `tasks.mlflow_metrics.queue_metrics`)."""
    logger = get_run_logger()
    totals = dict.fromkeys(
        ("episodes", "successes", "steps", "broken_episodes", "abandoned_episodes", "seconds", "batches"), 0.0
    )
    for i in range(batches):
        if i and (should_stop(stop_token, None) or session.should_stop()):
            break
        stats = run_batch(session)
        for key in totals.keys() - {"batches"}:
            totals[key] += stats[key]
        totals["batches"] += 1
        logger.info(
            "%d episodes, %d succeeded (rolling %.1f%% over the last %d), policy v%d, %.1f steps/s",
            stats["episodes"],
            stats["successes"],
            100 * session.rolling_success,
            len(session.recent),
            stats["policy_version"],
            stats["steps"] / max(stats["seconds"], 1e-9),
        )
        if session.mlflow_run_id is not None:
            hours = (time.monotonic() - session.started) / 3600
            metrics = {
                "rolling_success": session.rolling_success,
                "episodes_per_hour": session.episodes / max(hours, 1e-9),
                "steps_per_second": stats["steps"] / max(stats["seconds"], 1e-9),
                "step_latency_ms": stats["mean_step_latency_ms"],
                "policy_version": stats["policy_version"],
                "broken_episodes": session.broken,
            }
            # Queued, sent by this process's metrics thread: no MLflow call while the collector acts.
            queue_metrics(session.registry, session.mlflow_run_id, metrics, step=session.episodes)
    return totals | {"policy_version": float(session.version or 0)}


def wait_for_room(session: CollectorSession) -> bool:
    """Back-pressure: while the shard buffer is full (the store takes no shard: a full disk, an
    outage), act no more; say so once, keep flushing, and go on once a shard is written. False when
    the collector is told to stop meanwhile (its last flush then keeps trying, see `flush_shard`)."""
    writer = session.writer
    if writer.has_room:
        return True
    log.warning(
        "collector %s: shard buffer full (%d episodes, %.0f MB; caps %d episodes, %.0f MB), acting paused "
        "until the store takes a shard (last error: %s)",
        session.params.collector_id, writer.buffered_episodes, writer.buffered_bytes / 1e6,
        writer.config.max_buffered_episodes, writer.config.max_buffered_bytes / 1e6, writer.last_error,
    )  # fmt: skip
    started = time.monotonic()
    if not writer.wait_for_room(session.should_stop):
        return False
    pause = time.monotonic() - started
    log.warning(
        "collector %s: shard written, acting again after %.0f s paused", session.params.collector_id, pause
    )
    return True


def run_batch(session: CollectorSession) -> dict[str, float]:
    """One batch of episodes with the current policy, buffered for the next shard (not a task run).
    Waits first while the shard buffer is full; a stop during that wait runs no batch."""
    if not wait_for_room(session):
        return dict.fromkeys(_BATCH_STATS, 0.0) | {"policy_version": float(session.version or 0)}
    if session.policy is None or session.version is None:
        raise RuntimeError("no policy loaded yet; publish one (the learner or `distrl warm-start` does)")
    params = session.params
    pool = load_tasks(params.family, params.split)
    batch_tasks = [session.rng.choice(pool) for _ in range(params.episodes_per_batch)]
    batch_tasks = paraphrase_tasks(batch_tasks, params.paraphrase, session.rng)  # 0: draws nothing
    config = RolloutConfig(
        parallel_envs=len(session.envs),
        seed=session.rng.getrandbits(31),
        run_id=session.id,
        pool=params.pool,
        collector_id=params.collector_id,
        policy_version=session.version,
    )
    started = time.perf_counter()
    result = run_episodes(session.policy, batch_tasks, config, envs=session.envs, stop=session.should_stop)
    seconds = time.perf_counter() - started
    by_episode: dict[str, list[dict]] = {}
    for row in result.rows:
        by_episode.setdefault(row["episode_id"], []).append(row)
    for rows in by_episode.values():
        session.writer.add_episode(steps_to_table(rows))
    broken = sum(1 for episode in result.episodes if episode.status != "ok")
    session.episodes += len(result.episodes)
    session.steps += result.num_steps
    session.successes += sum(e.success for e in result.episodes)
    session.broken += broken
    session.abandoned += result.abandoned
    session.recent.extend(bool(e.success) for e in result.episodes)
    return {
        "episodes": len(result.episodes),
        "successes": sum(e.success for e in result.episodes),
        "steps": result.num_steps,
        "broken_episodes": broken,
        "abandoned_episodes": result.abandoned,
        "seconds": seconds,
        "policy_version": session.version,
        "mean_step_latency_ms": sum(r["step_latency_ms"] for r in result.rows) / max(1, result.num_steps),
    }


_BATCH_STATS = ("episodes", "successes", "steps", "broken_episodes", "abandoned_episodes", "seconds",
                "mean_step_latency_ms")  # fmt: skip


@task(
    retries=2,
    retry_delay_seconds=5,
    retry_condition_fn=only_transient,
    cache_policy=NO_CACHE,
    task_run_name="flush shard",
)
def flush_shard(session: CollectorSession, wait_s: float = 0.0) -> str | None:
    """Write the buffered episodes as one shard. The buffer survives a failure: with `wait_s` 0 it is
    kept for the next flush (one warning line), otherwise the flush is retried every
    `retry_seconds` for up to `wait_s` (a full disk frees up, a store comes back) before it raises."""
    writer = session.writer
    deadline = time.monotonic() + wait_s
    while True:
        try:
            path = writer.flush()
            return writer.store.url(path) if path else None
        except ShardFlushError as exc:
            left = deadline - time.monotonic()
            if left <= 0 and wait_s > 0:
                raise
            log.warning(
                "collector %s: %s%s",
                session.params.collector_id,
                exc,
                f" (retrying for up to {left:.0f} s more)" if left > 0 else "",
            )
            if left <= 0:
                return None
            time.sleep(min(writer.config.retry_seconds, left))
