from __future__ import annotations

import io
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from distrl_core.learner.config import learner_config
from storage.catalog import Catalog
from storage.store import Store, atomic_put
from tasks.retrain import DayWindow, WindowCatalog, partition_day, replay_settings

# ----- pure parts (no Prefect, no MLflow) -----------------------------------------------------------


def test_day_window_includes_both_ends_and_nothing_else() -> None:
    window = DayWindow.ending(date(2026, 11, 29), 3)
    assert str(window) == "2026-11-27..2026-11-29"
    assert date(2026, 11, 27) in window and date(2026, 11, 29) in window
    assert date(2026, 11, 26) not in window and date(2026, 11, 30) not in window
    assert DayWindow.ending(date(2026, 1, 1), 1) == DayWindow(date(2026, 1, 1), date(2026, 1, 1))
    with pytest.raises(ValueError, match="days >= 1"):
        DayWindow.ending(date(2026, 1, 1), 0)


def test_partition_day_reads_the_hive_partition_only() -> None:
    assert partition_day("/s/trajectories/pool=a/date=2026-11-03/c0-000001-ab.parquet") == date(2026, 11, 3)
    assert partition_day("bucket/p/trajectories/pool=a/date=2026-02-30/x.parquet") is None  # no such day
    assert partition_day("/s/trajectories/pool=a/c0-date=2026-11-03.parquet") is None  # not a partition
    assert partition_day("/s/trajectories/x.parquet") is None


def test_window_catalog_scans_only_the_window(tmp_path: Path) -> None:
    store = Store(uri=str(tmp_path), protocol="file", root=str(tmp_path))
    days = {"in": "2026-11-29", "edge_in": "2026-11-27", "edge_out": "2026-11-26", "future": "2026-11-30"}
    for name, day in days.items():
        atomic_put(store, store.path("trajectories", "pool=a", f"date={day}", f"{name}.parquet"), b"x")
    atomic_put(store, store.path("trajectories", "pool=a", "undated.parquet"), b"x")
    catalog = WindowCatalog(Catalog(store), DayWindow.ending(date(2026, 11, 29), 3))
    assert sorted(Path(s.path).stem for s in catalog.scan()) == ["edge_in", "in"]
    assert sorted(Path(p).stem for p in catalog.outside) == ["edge_out", "future"]
    assert [Path(p).stem for p in catalog.undated] == ["undated"]


def test_overrides_are_checked_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    # The continuous learner's own settings on the same machine must not leak into a retrain.
    monkeypatch.setenv("DISTRL_REPLAY_DB_PATH", "/tmp/learner-replay.duckdb")
    monkeypatch.setenv("DISTRL_REPLAY_LEARNER_ID", "learner")
    assert learner_config("filtered_bc", 3, {"actor_lr": 0.5}).actor_lr == 0.5
    with pytest.raises(ValueError, match="unknown field"):
        learner_config("aride", 0, {"actor_learning_rate": 1.0})
    settings = replay_settings({"min_size_steps": 5})
    assert settings.learner_id == "retrain" and settings.samples_per_insert is None
    assert settings.db_path == ":memory:" and settings.min_size_steps == 5
    with pytest.raises(ValueError, match="unknown field"):
        replay_settings({"min_steps": 5})  # ReplaySettings alone would ignore the typo
    with pytest.raises(ValueError, match="in-memory"):
        replay_settings({"db_path": "/tmp/replay.duckdb"})


# ----- the flow, under the session's Prefect harness --------------------------------------------------


def _publish(policy, registry, **tags) -> int:
    import tempfile

    from distrl_core.policy import save_policy

    run_id = registry.start_run("test-setup")
    with tempfile.TemporaryDirectory() as tmp:
        return registry.publish(save_policy(policy, Path(tmp) / "policy"), run_id=run_id, tags=tags)


def _write_shard(store, rows: list[dict], day: date) -> int:
    """Write rows as one shard in the `date=` partition of `day`; returns its episode count."""
    from storage.schema import steps_to_table
    from storage.shards import shard_dir

    table = steps_to_table(rows)
    sink = io.BytesIO()
    pq.write_table(table, sink)
    atomic_put(
        store,
        f"{shard_dir(store, 'pool_a', day.isoformat())}/c0-{uuid.uuid4().hex[:8]}.parquet",
        sink.getvalue(),
    )
    return len(set(table.column("episode_id").to_pylist()))


@pytest.mark.slow
def test_retrain_fine_tunes_champion_on_recent_data_and_promotes_only_if_better(embedded_home: Path) -> None:
    from distrl_core.policy import load_policy
    from distrl_core.policy.config import PolicyConfig, TinyModelConfig
    from distrl_core.policy.model import Policy
    from flows.retrain import RetrainParams, retrain
    from simulators.rollout import RolloutConfig, expert_actor, run_episodes
    from simulators.simdroid.tasks import load_tasks
    from storage.registry import PolicyRegistry
    from storage.store import open_store
    from tasks.evaluation import HELDOUT_TAG
    from tasks.retrain import RetrainDataError, resolve_start_version

    registry = PolicyRegistry()
    with pytest.raises(LookupError, match="Publish one first"):
        retrain(RetrainParams(updates=1))

    # v1: the champion (random weights, never evaluated); v2: `latest`, a differently shaped model,
    # so the candidate's config shows which of the two it was trained from.
    champion = _publish(Policy.create(PolicyConfig()), registry)
    assert resolve_start_version.fn("champion") == (champion, "latest")  # no champion yet
    registry.set_alias("champion", champion)
    other = PolicyConfig(tiny=TinyModelConfig(hidden_size=32, intermediate_size=64))
    latest = _publish(Policy.create(other), registry)
    assert (champion, latest) == (1, 2)

    # Recent shards (written today and on the two days before) hold the expert's demonstrations; the
    # old ones, one day and 40 days before the window, hold them again under other episode ids.
    store = open_store()
    today = datetime.now(UTC).date()
    train = load_tasks("general", "train")
    expert = run_episodes(expert_actor(0.0, 0), train[:48], RolloutConfig(parallel_envs=8, policy_version=1))
    episodes = sorted({r["episode_id"] for r in expert.rows})
    recent = sum(
        _write_shard(
            store,
            [r for r in expert.rows if episodes.index(r["episode_id"]) % 3 == i],
            today - timedelta(days=i),
        )
        for i in range(3)
    )
    rows = [r | {"episode_id": f"old-{r['episode_id']}"} for r in expert.rows]
    old_shards = [today - timedelta(days=3), today - timedelta(days=40)]
    for day in old_shards:
        _write_shard(store, rows, day)

    # Filtered BC from random weights: 0% held-out success before; after these 10 updates 5-16 of
    # the 66 general test tasks in 8 trials (bench-style runs of the same replay and learner).
    base = {
        "recent_days": 3,  # today and the two days before: the shards of days 0..2
        "updates": 10,
        "updates_per_block": 4,
        "batch_size": 32,
        "algorithm": "filtered_bc",
        "learner_config": {"critic_warmup_updates": 0, "actor_lr": 2e-3},
        "replay": {"min_size_steps": 20},
        "family": "general",
    }
    # The candidate beats the champion, but not by the margin asked for: recorded, not promoted.
    first = retrain(RetrainParams(**(base | {"min_improvement": 0.5})))
    candidate = first["candidate_version"]
    assert first["start_version"] == champion and candidate == 3
    tags = registry.tags(candidate)
    assert tags["retrain"] == "true" and tags["parent_version"] == str(champion)
    trained = load_policy(registry.fetch(candidate).path)
    assert trained.config.tiny.hidden_size == 64  # v1's weights, not `latest`'s

    assert first["data"]["episodes"] == len(episodes) == recent
    assert first["data"]["shards"] == 3 and first["data"]["shards_outside_window"] == len(old_shards)

    # Both sides evaluated on one protocol; the champion's score was recorded first.
    assert float(registry.tags(champion)[HELDOUT_TAG]) == pytest.approx(first["champion_success"], abs=1e-6)
    assert float(tags[HELDOUT_TAG]) == pytest.approx(first["candidate_success"], abs=1e-6)
    assert first["champion_success"] < first["candidate_success"] <= first["champion_success"] + 0.5, first
    assert not first["promoted"] and registry.resolve("champion") == champion

    # Any gain is enough: the next candidate (again from v1, not from `latest` v3) is promoted.
    second = retrain(RetrainParams(**base))
    assert second["start_version"] == champion and second["candidate_version"] == 4
    assert registry.tags(4)["parent_version"] == str(champion) and HELDOUT_TAG in registry.tags(4)
    assert second["candidate_success"] > second["champion_success"], second
    assert second["promoted"] and registry.resolve("champion") == 4

    # Too little recent data for the replay's minimum: a clear error, and nothing published.
    with pytest.raises(RetrainDataError, match="Widen recent_days"):
        retrain(RetrainParams(**(base | {"replay": {"min_size_steps": 100_000}})))
    assert registry.versions() == [1, 2, 3, 4]
