"""A priority snapshot is checked against the replay's real sizes and bounds, so that no snapshot a
person (or an attacker) writes can stop sampling or poison the importance weights: counters that
claim more inserted steps than the store holds are refused with a warning, and priorities beyond
`MAX_PRIORITY` are lowered to it (10^308 with alpha=1 made every weight NaN)."""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
import pytest

from storage.replay import Replay
from storage.replay_config import ReplaySettings
from storage.replay_sample import importance_weights
from storage.replay_snapshot import MAX_PRIORITY, stored_steps, write_priority_snapshot
from storage.store import Store
from tests.reliability.conftest import fill


def _settings(**overrides: object) -> ReplaySettings:
    values: dict = {
        "min_size_steps": 1,
        "samples_per_insert": 4.0,
        "error_buffer_steps": 10.0,
        "learner_id": "L1",
    }
    return ReplaySettings(**(values | overrides))


def _snapshot(store: Store, ids: list[str], priorities: list[float], **counters: int) -> str:
    path = store.path("replay", "L1", "priorities.parquet")
    table = pa.table({"episode_id": ids, "priority": pa.array(priorities, pa.float64())})
    write_priority_snapshot(store, path, table, max_priority=max(priorities), policy_version=0, **counters)  # type: ignore[arg-type]
    return path


def test_counters_beyond_the_stores_size_are_refused_and_sampling_works(local_store: Store, caplog) -> None:
    ids = fill(local_store, 12)
    path = _snapshot(local_store, ids, [3.0] * 12, inserted_steps=10**18, sampled_steps=10**15)
    with caplog.at_level(logging.WARNING, logger="storage.replay"):
        replay = Replay(local_store, _settings())
    replay.ingest()
    warning = next(r.getMessage() for r in caplog.records if "set aside" in r.getMessage())
    held = stored_steps(local_store, 10**18)
    assert f"sampled_steps={10**15}" in warning and f"shards hold {held}:" in warning and path in warning
    assert "\n" not in warning
    assert len(local_store.fs.glob(f"{path}.bad-*")) == 1 and not local_store.fs.exists(path)
    assert replay.limiter.sampled == 0
    assert replay.sample(4).size == 4  # with the counters restored, this was ReplayNotReady forever
    replay.close()


@pytest.mark.parametrize("spare", [0, 1])
def test_counters_are_restored_exactly_while_the_store_can_repay_them(local_store: Store, spare: int) -> None:
    ids = fill(local_store, 12)
    held = stored_steps(local_store, 10**18)
    # samples_per_insert=4, error_buffer=10: re-ingesting the store allows 4 * held + 10 samples.
    sampled = 4 * held + 10 + (1 - spare) * 4
    path = _snapshot(local_store, ids, [3.0] * 12, inserted_steps=10**18, sampled_steps=sampled)
    replay = Replay(local_store, _settings())
    replay.ingest()
    if spare:
        assert local_store.fs.exists(path) and replay.limiter.sampled == sampled
        assert set(replay.priorities_of(ids).values()) == {3.0}
    else:  # one more inserted step needed than the store holds: refused
        assert not local_store.fs.exists(path) and replay.limiter.sampled == 0
    replay.close()


def test_a_huge_restored_priority_is_bounded_and_every_weight_is_finite(local_store: Store, caplog) -> None:
    ids = fill(local_store, 12)
    # Two of them: their sum overflowed to inf, and every weight was NaN.
    _snapshot(local_store, ids, [1e308, 1.7e308] + [1.0] * 10, inserted_steps=0, sampled_steps=0)
    with caplog.at_level(logging.WARNING, logger="storage.replay"):
        replay = Replay(local_store, _settings(alpha=1.0, samples_per_insert=None))
    replay.ingest()
    assert any("MAX_PRIORITY" in r.getMessage() for r in caplog.records)
    restored = replay.priorities_of(ids)
    assert restored[ids[0]] == restored[ids[1]] == MAX_PRIORITY and max(restored.values()) == MAX_PRIORITY
    batch = replay.sample(64, beta=1.0, seed=3)
    assert np.all(np.isfinite(batch.is_weights)) and np.all(batch.is_weights > 0)
    assert batch.is_weights.max() == pytest.approx(1.0)
    # Plain-loop reference: (N * P(i))^-beta over the batch maximum, with the bounded priorities.
    total = sum(restored.values())
    plain = [(len(ids) * restored[e] / total) ** -1.0 for e in batch.episode_ids]
    assert batch.is_weights == pytest.approx(np.array(plain) / max(plain))
    replay.close()


def test_a_huge_written_back_priority_is_bounded(local_store: Store) -> None:
    ids = fill(local_store, 12)
    replay = Replay(local_store, _settings(alpha=1.0, samples_per_insert=None))
    replay.ingest()
    batch = replay.sample(4, seed=1)
    replay.update_priorities(batch.slots, np.full(4, 1e308))
    assert max(replay.priorities_of(ids).values()) == MAX_PRIORITY
    weights = replay.sample(64, seed=2).is_weights
    assert np.all(np.isfinite(weights)) and np.all(weights > 0)
    replay.close()


def test_importance_weights_match_a_plain_loop_and_refuse_bad_input() -> None:
    rng = np.random.default_rng(0)
    w = rng.uniform(1e-6, 1e12, 50)
    total, n, beta = w.sum() * 3, 200, 0.7
    plain = [(n * x / total) ** -beta for x in w]
    assert importance_weights(w, beta) == pytest.approx(np.array(plain) / max(plain))
    for bad in (np.inf, np.nan, 0.0):
        with pytest.raises(ValueError, match="finite and > 0"):
            importance_weights(np.array([1.0, bad]), beta)
