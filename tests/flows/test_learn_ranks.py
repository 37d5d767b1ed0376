"""The `learn` flow with learner_processes=2: rank 0 starts the second learner process, rank 0
publishes, and a collector acts with the version it published."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from flows.collect import collect
from flows.learn import learn
from simulators.warm_start import WarmStartConfig
from storage.replay_config import ReplaySettings
from tasks.collector import CollectorParams
from tasks.learner import LearnerParams
from tasks.warm_start import warm_start_policy


def _versions_collected(store: Path) -> set[int]:
    """Policy versions in the store's trajectory shards (not the replay's priority snapshot)."""
    shards = [p for p in store.rglob("*.parquet") if "policy_version" in pq.read_schema(p).names]
    return {v for p in shards for v in pq.read_table(p, columns=["policy_version"]).column(0).to_pylist()}


@pytest.mark.slow  # Prefect's harness, MLflow on SQLite, two collections and a second learner process
def test_a_two_process_learner_publishes_a_version_a_collector_acts_with(embedded_home: Path, caplog) -> None:
    warm_start_policy.fn(WarmStartConfig(family="general", updates=2))
    collector = CollectorParams(pool="pool_a", collector_id="a0", family="general", max_episodes=8)
    assert collect(collector)["episodes"] == 8
    params = LearnerParams(
        batch_size=4, updates_per_block=2, publish_every_updates=2, max_updates=2, learner_processes=2
    )
    with caplog.at_level(logging.INFO, logger="tasks.learner_ranks"):
        result = learn(params, ReplaySettings(min_size_steps=1, samples_per_insert=None), bootstrap=False)
    assert result["published"] == [2] and result["updates"] == 2
    assert "started 1 follower learner rank(s)" in caplog.text
    assert collect(collector.model_copy(update={"collector_id": "a1"}))["episodes"] == 8
    assert _versions_collected(embedded_home / "store") == {1, 2}
