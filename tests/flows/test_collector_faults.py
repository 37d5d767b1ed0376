from __future__ import annotations

import tempfile
import time
from pathlib import Path

from distrl_core.policy import save_policy
from distrl_core.policy.config import PolicyConfig
from distrl_core.policy.model import Policy
from storage.catalog import list_shards, read_shard
from storage.registry import PolicyRegistry
from storage.replay import Replay
from storage.replay_config import ReplaySettings
from storage.store import open_store
from tasks.collector import (
    CollectorParams,
    close_collector,
    collect_episode_batch,
    flush_shard,
    load_policy_version,
    open_collector,
)


def _publish_untrained_policy() -> int:
    registry = PolicyRegistry()
    with tempfile.TemporaryDirectory() as tmp:
        path = save_policy(Policy.create(PolicyConfig()), Path(tmp) / "policy")
        return registry.publish(path, run_id=registry.start_run("test"))


def test_env_failure_mid_episode_is_recorded_and_not_trained_on(embedded_home: Path) -> None:
    version = _publish_untrained_policy()
    params = CollectorParams(num_envs=2, episodes_per_batch=4, family="general", flush_seconds=0)
    session = open_collector(params)
    broken_env = session.envs[0]
    real_step, calls = broken_env.step, {"n": 0}

    def flaky_step(action):
        calls["n"] += 1
        if calls["n"] == 2:
            raise ConnectionError("emulator went away")
        return real_step(action)

    broken_env.step = flaky_step
    load_policy_version(session, version)
    first = collect_episode_batch(session)
    second = collect_episode_batch(session)  # the collector keeps going after the failure
    flush_shard(session)
    close_collector(session)

    assert first["broken_episodes"] == 1 and second["broken_episodes"] == 0
    assert first["episodes"] == 4 and second["episodes"] == 4
    store = open_store()
    rows = [r for s in list_shards(store) for r in read_shard(store, s.path).to_pylist()]
    broken = {r["episode_id"] for r in rows if r["episode_status"] == "env_error"}
    assert len(broken) == 1
    assert all(not r["episode_success"] for r in rows if r["episode_id"] in broken)
    replay = Replay(store, ReplaySettings(min_size_steps=1))
    report = replay.ingest()
    assert report.episodes == 7 and report.skipped_episodes == 1
    assert not broken & {e for (e,) in replay.con.execute("SELECT episode_id FROM episodes").fetchall()}
    replay.close()


def test_a_stopped_collector_ends_mid_batch_and_stores_only_whole_episodes(embedded_home: Path) -> None:
    import threading

    from flows.collect import collect
    from tasks.collector import CollectorSession
    from tasks.stop import StopToken

    _publish_untrained_policy()
    # Slow emulators: one batch of 8 episodes at a 3 s median step takes minutes, so a collector
    # that only looked at its stop token between batches would still be running at the join.
    params = CollectorParams(
        num_envs=2, episodes_per_batch=8, family="general", step_latency_s=3.0, flush_seconds=0
    )
    token, results = StopToken(), {}
    worker = threading.Thread(target=lambda: results.update(collect(params, token.id)), daemon=True)
    try:
        worker.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # wait until it acts: a version loaded, steps under way
            sessions = token.open_sessions(CollectorSession)
            if sessions and sessions[0].version is not None:
                break
            time.sleep(0.2)
        time.sleep(4)
        token.set()
        worker.join(timeout=60)
        assert not worker.is_alive(), "the collector sat out its batch after the stop"
    finally:
        token.set()
        token.close()
    assert results["abandoned"] >= 1
    store = open_store()
    rows = [r for s in list_shards(store) for r in read_shard(store, s.path).to_pylist()]
    assert len({r["episode_id"] for r in rows}) == results["episodes"]
    # Every stored episode is whole: steps 0..n-1 with the last one done.
    by_episode: dict[str, list[dict]] = {}
    for row in rows:
        by_episode.setdefault(row["episode_id"], []).append(row)
    for steps in by_episode.values():
        assert sorted(r["step"] for r in steps) == list(range(len(steps)))
        assert max(steps, key=lambda r: r["step"])["done"]
