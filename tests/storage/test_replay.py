from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chisquare

from storage.replay import Replay, ReplayNotReady
from storage.replay_config import ReplaySettings
from storage.shards import ShardWriter, ShardWriterConfig
from storage.store import Store
from storage.synthetic import synthetic_episode

SMALL_BLOCKS = {"block_size": 4, "super_size": 3}  # many blocks and super-blocks: every stage is exercised


def _fill(
    store: Store, n: int, *, seed: int = 0, n_steps: int | None = 3, versions=lambda i: 1, name="c0"
) -> list[str]:
    rng = np.random.default_rng(seed)
    ids = []
    config = ShardWriterConfig(pool="pool_a", collector_id=name, flush_episodes=16, flush_seconds=0)
    with ShardWriter(store, config) as writer:
        for i in range(n):
            episode = synthetic_episode(rng, n_steps=n_steps, policy_version=versions(i))
            ids.append(episode.column("episode_id")[0].as_py())
            writer.add_episode(episode)
    return ids


def _replay(store: Store, **kw) -> Replay:
    settings = {"min_size_steps": 1, "samples_per_insert": None, **SMALL_BLOCKS, **kw}
    return Replay(store, ReplaySettings(**settings))


def _draw_counts(replay: Replay, n_items: int, batches: int, batch: int = 500) -> np.ndarray:
    counts = np.zeros(n_items)
    for _ in range(batches):
        np.add.at(counts, replay.sample(batch).slots, 1)
    return counts


def test_sampling_is_exactly_proportional_to_priority_alpha(local_store: Store) -> None:
    _fill(local_store, 150, n_steps=1)
    replay = _replay(local_store, alpha=0.6)
    replay.ingest()
    rng = np.random.default_rng(1)
    priorities = rng.uniform(0.05, 20.0, 150)
    priorities[:5] = replay.config.min_priority  # near-zero items must almost never be drawn
    replay.update_priorities(np.arange(150), priorities)
    counts = _draw_counts(replay, 150, batches=60)
    target = priorities**0.6 / np.sum(priorities**0.6)
    # The near-zero items share one bin: their expected count (~0.06) is too small for chi-square alone.
    merged_counts = np.concatenate([[counts[:5].sum()], counts[5:]])
    merged_target = np.concatenate([[target[:5].sum()], target[5:]])
    assert counts[:5].sum() <= 3
    assert chisquare(merged_counts, counts.sum() * merged_target).pvalue > 1e-4
    # Negative controls: the same counts are far from p (alpha ignored) and from uniform.
    wrong = priorities[5:] / priorities[5:].sum()
    assert chisquare(counts[5:], counts[5:].sum() * wrong).pvalue < 1e-9
    assert chisquare(counts[5:], np.full(145, counts[5:].sum() / 145)).pvalue < 1e-9
    replay.close()


def test_probabilities_and_importance_weights_follow_the_formula(local_store: Store) -> None:
    _fill(local_store, 40)
    replay = _replay(local_store, alpha=0.5)
    replay.ingest()
    priorities = np.linspace(0.5, 8.0, 40)
    replay.update_priorities(np.arange(40), priorities)
    batch = replay.sample(64, beta=0.7)
    w = priorities**0.5
    expected_p = w[batch.slots] / w.sum()
    np.testing.assert_allclose(batch.probabilities, expected_p, rtol=1e-9)
    raw = (40 * expected_p) ** -0.7
    np.testing.assert_allclose(batch.is_weights, raw / raw.max(), rtol=1e-9)
    assert batch.is_weights.max() == pytest.approx(1.0)
    replay.close()


def test_sample_returns_whole_trajectories_or_windows(local_store: Store) -> None:
    ids = _fill(local_store, 30, n_steps=None)
    replay = _replay(local_store)
    replay.ingest()
    whole = replay.sample(20)
    lengths = {e: n for e, n in replay.con.execute("SELECT episode_id, n_steps FROM episodes").fetchall()}
    rows = whole.steps.to_pylist()
    for k, episode in enumerate(whole.episode_ids):
        steps = [r["step"] for r in rows if r["sample_idx"] == k]
        assert episode in ids and steps == list(range(lengths[episode]))
    windows = replay.sample(200, window=3)
    rows = windows.steps.to_pylist()
    for k, episode in enumerate(windows.episode_ids):
        steps = [r["step"] for r in rows if r["sample_idx"] == k]
        start = int(windows.window_starts[k])
        assert steps == list(range(start, min(start + 3, lengths[episode])))
        assert 0 <= start <= max(0, lengths[episode] - 3)
    replay.close()


def test_capacity_keeps_the_newest_trajectories(local_store: Store) -> None:
    ids = _fill(local_store, 40, n_steps=5)
    replay = _replay(local_store, capacity_steps=50)
    report = replay.ingest()
    assert report.evicted_episodes == 30 and replay.size_steps == 50
    drawn = set(replay.sample(300).episode_ids)
    assert drawn <= set(ids[-10:]) and len(drawn) > 5
    more = _fill(local_store, 4, n_steps=5, seed=5, name="c1")
    replay.ingest()
    drawn = set(replay.sample(300).episode_ids)
    assert drawn <= set(ids[-6:] + more)
    assert set(more) <= drawn
    replay.close()


def test_max_policy_lag_excludes_stale_trajectories(local_store: Store) -> None:
    ids = _fill(local_store, 50, versions=lambda i: i // 10)  # versions 0..4
    replay = _replay(local_store, max_policy_lag=1)
    replay.ingest()
    replay.set_policy_version(4)
    fresh = {e for i, e in enumerate(ids) if i // 10 >= 3}
    assert set(replay.sample(400).episode_ids) == fresh
    replay.set_policy_version(9)
    with pytest.raises(ReplayNotReady, match="max_policy_lag"):
        replay.sample(4)
    # New shards from a stale version are not even inserted.
    _fill(local_store, 3, versions=lambda i: 2, seed=3, name="late")
    assert replay.ingest().skipped_episodes == 3
    replay.close()


def test_min_size_and_sample_to_insert_ratio(local_store: Store) -> None:
    replay = Replay(
        local_store,
        ReplaySettings(min_size_steps=30, samples_per_insert=2.0, error_buffer_steps=0, **SMALL_BLOCKS),
    )
    _fill(local_store, 5)  # 15 steps
    replay.ingest()
    with pytest.raises(ReplayNotReady, match="min_size_steps=30"):
        replay.sample(2)
    _fill(local_store, 5, seed=1, name="c1")  # 30 steps in total
    replay.ingest()
    sampled = 0
    with pytest.raises(ReplayNotReady, match="sample-to-insert ratio"):
        for _ in range(100):
            sampled += replay.sample(4).steps.num_rows
    assert 48 <= sampled <= 60  # 2 samples per inserted step, 30 inserted
    _fill(local_store, 10, seed=2, name="c2")
    replay.ingest()
    replay.sample(4)  # new data lifts the limit
    replay.close()


def test_priorities_survive_a_restart_from_the_store(any_store: Store) -> None:
    ids = _fill(any_store, 30)
    first = _replay(any_store, learner_id="L1")
    first.ingest()
    rng = np.random.default_rng(0)
    batch = first.sample(16)
    first.update_priorities(batch.slots, rng.uniform(1, 50, 16))
    before = first.priorities_of(ids)
    first.checkpoint()
    first.close()
    second = _replay(any_store, learner_id="L1")  # a fresh DuckDB: everything comes from the store
    second.ingest()
    assert second.priorities_of(ids) == pytest.approx(before)
    assert second.max_priority == pytest.approx(first.max_priority)
    # A new trajectory starts at the largest priority seen, not at 1.
    new = _fill(any_store, 1, seed=7, name="c9")
    second.ingest()
    assert second.priorities_of(new)[new[0]] == pytest.approx(max(before.values()))
    second.close()


def test_local_database_resumes_without_reingesting(local_store: Store, tmp_path) -> None:
    _fill(local_store, 12)
    db = str(tmp_path / "replay.duckdb")
    replay = _replay(local_store, db_path=db)
    replay.ingest()
    replay.update_priorities(np.array([0, 1]), np.array([7.0, 9.0]))
    replay.close()
    again = _replay(local_store, db_path=db)
    assert again.ingest().shards == 0
    assert again.episodes == 12 and again.next_slot == 12
    batch = again.sample(200)
    assert set(batch.slots) <= set(range(12))
    again.close()


def test_priority_write_back_validates_input(local_store: Store) -> None:
    _fill(local_store, 4)
    replay = _replay(local_store)
    replay.ingest()
    with pytest.raises(ValueError, match="finite"):
        replay.update_priorities(np.array([0]), np.array([np.nan]))
    with pytest.raises(ValueError, match="slots but"):
        replay.update_priorities(np.array([0, 1]), np.array([1.0]))
    replay.close()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_size_steps": 10, "capacity_steps": 5}, "min_size_steps"),
        ({"alpha": 1.5}, "alpha"),
    ],
)
def test_bad_config_is_explained(kwargs, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ReplaySettings(**kwargs).validate_all()


def test_incremental_sums_match_a_full_rebuild(local_store: Store) -> None:
    from storage import replay_sql as sql

    _fill(local_store, 60, versions=lambda i: i // 20)
    replay = _replay(local_store, max_policy_lag=1, capacity_steps=150)
    replay.ingest()
    rng = np.random.default_rng(4)
    for _ in range(10):
        slots = rng.choice(np.arange(replay.first_slot, replay.next_slot), 7)
        replay.update_priorities(slots, rng.uniform(0.1, 5, 7))
    replay.set_policy_version(3)
    _fill(local_store, 9, seed=8, name="c8", versions=lambda i: 3)
    replay.ingest()
    query = "SELECT super, wsum, npos, bsums FROM supers ORDER BY super"
    incremental = replay.con.execute(query).fetchall()
    sql.run_script(replay.con, sql.REBUILD_ALL_SUPERS)
    rebuilt = replay.con.execute(query).fetchall()
    assert len(incremental) == len(rebuilt)
    for a, b in zip(incremental, rebuilt, strict=True):
        assert a[0] == b[0] and a[2] == b[2]
        assert a[1] == pytest.approx(b[1]) and a[3] == pytest.approx(b[3])
    blocks = replay.con.execute("SELECT wsum, list_sum(ws), npos FROM blocks").fetchall()
    assert all(w == pytest.approx(s) for w, s, _ in blocks)
    replay.close()


def test_seeded_sampling_is_reproducible(local_store: Store) -> None:
    """Same seed and same contents: the same draw, whatever DuckDB's thread count."""
    _fill(local_store, 60, n_steps=None)

    def draw(threads: int, seed: int):
        replay = _replay(local_store, duckdb_threads=threads)
        replay.ingest()
        replay.update_priorities(np.arange(60), np.linspace(0.1, 5.0, 60))
        batch = replay.sample(48, seed=seed, window=3)
        replay.close()
        return batch

    first, again, other = draw(2, seed=1), draw(1, seed=1), draw(2, seed=2)
    assert first.slots.tolist() == again.slots.tolist()
    assert first.window_starts.tolist() == again.window_starts.tolist()
    assert first.steps.to_pylist() == again.steps.to_pylist()
    assert first.slots.tolist() != other.slots.tolist()


@pytest.mark.parametrize("name", ["MIN_PRIORITY", "INITIAL_PRIORITY", "SAMPLES_PER_INSERT"])
@pytest.mark.parametrize("value", ["inf", "-inf", "nan"])
def test_non_finite_priority_settings_are_refused(monkeypatch, name: str, value: str) -> None:
    monkeypatch.setenv(f"DISTRL_REPLAY_{name}", value)
    with pytest.raises(ValueError, match=f"DISTRL_REPLAY_{name}.*finite"):
        ReplaySettings()


def test_zero_duckdb_threads_names_the_variable(monkeypatch) -> None:
    monkeypatch.setenv("DISTRL_REPLAY_DUCKDB_THREADS", "0")
    with pytest.raises(ValueError, match="DISTRL_REPLAY_DUCKDB_THREADS"):
        ReplaySettings()


def test_infinite_write_back_and_snapshot_priorities_are_refused(local_store: Store) -> None:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from storage.store import atomic_put

    ids = _fill(local_store, 4)
    replay = _replay(local_store)
    replay.ingest()
    with pytest.raises(ValueError, match="finite"):
        replay.update_priorities(np.array([0]), np.array([np.inf]))
    replay.close()
    # A snapshot holding inf (a hand-edited or corrupted file) must not poison a restarted replay.
    snapshot = pa.table({"episode_id": ids, "priority": [np.inf, 2.0, np.nan, 3.0]})
    sink = io.BytesIO()
    pq.write_table(snapshot.replace_schema_metadata({b"max_priority": b"inf"}), sink)
    atomic_put(local_store, replay.snapshot_path, sink.getvalue())
    again = _replay(local_store)
    again.ingest()
    assert np.all(np.isfinite(again.sample(32).probabilities))
    assert again.max_priority == pytest.approx(3.0)
    again.close()
