"""Learner tasks: ingest new shards, train a block of updates, publish a version, persist priorities.

The replay (DuckDB) and the learner (model + optimisers) live in a session in the flow's process.
A task run is a block of work a person wants to see and retry: one ingest scan, K updates, one
publish; never a single update.
"""

from __future__ import annotations

import logging
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE
from pydantic import BaseModel, Field

from distrl_core.learner.config import LearnerConfig
from distrl_core.learner.learner import Learner
from storage.registry import PolicyRegistry
from storage.replay import Replay, ReplayNotReady
from storage.replay_config import ReplaySettings
from storage.store import open_store
from tasks import sessions
from tasks.mlflow_metrics import log_metrics, with_retries
from tasks.policy_io import load_policy, save_policy

log = logging.getLogger(__name__)


class LearnerParams(BaseModel):
    """Parameters of the `learn` deployment."""

    batch_size: int = Field(16, ge=1, description="Trajectories per update.")
    window: int | None = Field(None, description="Steps per sampled window (None: whole trajectories).")
    updates_per_block: int = Field(8, ge=1, description="Updates per task run.")
    publish_every_updates: int = Field(16, ge=1, description="Publish a new version every K updates.")
    max_updates: int | None = Field(None, description="Stop after this many updates (None: no limit).")
    max_minutes: float | None = Field(None, description="Stop after this many minutes (None: no limit).")
    idle_sleep_s: float = Field(
        1.0, ge=0, description="Wait when the replay is not ready (too small or ratio)."
    )
    store_uri: str | None = Field(None, description="Trajectory store (default: DISTRL_STORE_URI).")
    algorithm: str = Field("aride", description="'aride', 'digirl' or 'filtered_bc'.")
    seed: int = Field(0, description="Seeds the learner.")


@dataclass
class LearnerSession:
    params: LearnerParams
    replay: Replay
    learner: Learner
    registry: PolicyRegistry
    run_id: str
    version: int
    samples_seen: int = 0
    busy_s: float = 0.0
    started: float = field(default_factory=time.monotonic)

    @property
    def duty_cycle(self) -> float:
        return self.busy_s / max(1e-9, time.monotonic() - self.started)


def open_learner(params: LearnerParams, replay_settings: ReplaySettings | None = None) -> str:
    """Resume from the newest published version (there must be one: warm start publishes version 1)."""
    registry = PolicyRegistry()
    latest = registry.resolve("latest")
    if latest is None:
        raise LookupError("no policy version to resume from: run the warm start first (`distrl warm-start`)")
    fetched = registry.fetch(latest)
    policy = load_policy(fetched.path)
    config = LearnerConfig(algorithm=params.algorithm, seed=params.seed)
    learner = Learner(policy, config, policy_version=latest)
    replay = Replay(open_store(params.store_uri), replay_settings or ReplaySettings())
    replay.set_policy_version(latest)
    run_id = with_retries(
        lambda: registry.start_run("learner", tags={"role": "learner", "algorithm": params.algorithm}),
        "starting the learner's MLflow run",
    )
    with_retries(
        lambda: registry.client.log_batch(run_id, params=_params_for_mlflow(params, config)), "logging params"
    )
    session = LearnerSession(params, replay, learner, registry, run_id, latest)
    return sessions.register(session, "learner")


def _params_for_mlflow(params: LearnerParams, config: LearnerConfig):
    from mlflow.entities import Param

    values = {f"learner.{k}": v for k, v in config.to_dict().items()}
    values |= {f"flow.{k}": v for k, v in params.model_dump().items() if k != "store_uri"}
    return [Param(k, str(v)[:500]) for k, v in sorted(values.items())]


def close_learner(session_id: str) -> None:
    session = sessions.close(session_id)
    if session is not None:
        session.replay.checkpoint()
        session.replay.close()
        with_retries(
            lambda: session.registry.client.set_terminated(session.run_id), "closing the learner's run"
        )


@task(retries=3, retry_delay_seconds=2, cache_policy=NO_CACHE)
def ingest_shards(session_id: str) -> dict[str, int]:
    """Ingest shards written since the last scan (bad ones are quarantined)."""
    session = sessions.get(session_id, LearnerSession)
    report = session.replay.ingest()
    return report.__dict__ | {
        "replay_steps": session.replay.size_steps,
        "replay_episodes": session.replay.episodes,
    }


@task(cache_policy=NO_CACHE)
def train_block(session_id: str) -> dict[str, float]:
    """Up to `updates_per_block` updates; stops early (status 'waiting') when the replay is not ready."""
    session = sessions.get(session_id, LearnerSession)
    params, replay, learner = session.params, session.replay, session.learner
    done, metrics = 0, {}
    for _ in range(params.updates_per_block):
        try:
            batch = replay.sample(params.batch_size, beta=learner.beta_at(), window=params.window)
        except ReplayNotReady as exc:
            return {"updates": done, "waiting": 1.0, **metrics} | {
                "reason_code": 1.0 if "min_size" in exc.reason else 2.0
            }
        started = time.perf_counter()
        metrics, priorities = learner.update(batch.steps, batch.is_weights)
        replay.update_priorities(batch.slots, priorities)
        session.busy_s += time.perf_counter() - started
        session.samples_seen += batch.steps.num_rows
        done += 1
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


@task(retries=3, retry_delay_seconds=2, cache_policy=NO_CACHE)
def publish_policy(session_id: str) -> int:
    """Save the current weights as a new registry version and point the learner and replay at it."""
    session = sessions.get(session_id, LearnerSession)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "policy"
        save_policy(session.learner.policy, path)
        version = session.registry.publish(
            path,
            run_id=session.run_id,
            tags={
                "learner_step": session.learner.updates,
                "samples_seen": session.samples_seen,
                "replay_size": session.replay.size_steps,
                "algorithm": session.params.algorithm,
            },
        )
    session.version = version
    session.learner.policy_version = version
    session.replay.set_policy_version(version)
    log.info("published version %d after %d updates", version, session.learner.updates)
    return version


@task(retries=3, retry_delay_seconds=2, cache_policy=NO_CACHE)
def checkpoint_replay(session_id: str) -> str:
    """Persist trajectory priorities to the store (a restarted learner resumes them)."""
    session = sessions.get(session_id, LearnerSession)
    return session.replay.store.url(session.replay.checkpoint())
