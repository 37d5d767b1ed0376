"""Date-bounded shard discovery: after its first scan, a replay lists only recent `date=` partitions.

The S3 test counts what reaches a real (moto) S3 server: the keys its LIST responses carry.
"""

from __future__ import annotations

import io
import uuid
from datetime import UTC, date, datetime, timedelta

import numpy as np
import pyarrow.parquet as pq
import pytest

from bench.s3_counter import S3Counter
from storage import catalog
from storage.replay import Replay
from storage.replay_config import ReplaySettings
from storage.shards import shard_dir
from storage.store import Store, atomic_put
from storage.synthetic import synthetic_episode

TODAY = datetime.now(UTC).date()


@pytest.fixture(autouse=True)
def _same_day(monkeypatch: pytest.MonkeyPatch) -> None:
    """The catalog's today is this module's TODAY, also when a test runs past midnight UTC."""
    monkeypatch.setattr(catalog, "today_utc", lambda: TODAY)


def _put(store: Store, pool: str, day: date, seed: int) -> str:
    """One single-episode shard in `pool=<pool>/date=<day>/`, as a collector writes it."""
    sink = io.BytesIO()
    pq.write_table(synthetic_episode(np.random.default_rng(seed)), sink)
    path = f"{shard_dir(store, pool, day.isoformat())}/c{seed}-000000-{uuid.uuid4().hex[:12]}.parquet"
    atomic_put(store, path, sink.getvalue())
    return path


def _history(store: Store, days: int, pools: tuple[str, ...] = ("a", "b"), per_day: int = 2) -> int:
    seed = 0
    for back in range(days):
        for pool in pools:
            for _ in range(per_day):
                seed += 1
                _put(store, pool, TODAY - timedelta(days=back), seed)
    return seed


def _replay(store: Store, **kw) -> Replay:
    return Replay(store, ReplaySettings(min_size_steps=1, samples_per_insert=None, **kw))


def test_a_scan_after_the_first_lists_only_recent_partitions_on_s3(
    counted_s3_store: tuple[Store, S3Counter],
) -> None:
    store, counter = counted_s3_store
    written = _history(store, days=20)  # 2 pools x 20 days x 2 shards
    replay = _replay(store)
    counter.phase = "first"
    assert replay.ingest().shards == written
    first = counter.phase_totals("first")["LIST"]["keys"]
    assert first >= written  # the first scan lists the whole history
    late = _put(store, "a", TODAY - timedelta(days=1), seed=1000)  # yesterday's partition, late
    fresh = _put(store, "b", TODAY, seed=1001)
    counter.phase = "second"
    report = replay.ingest()
    assert report.shards == 2 and {late, fresh} <= replay.catalog.known
    listed = counter.phase_totals("second")["LIST"]["keys"]
    # today's and yesterday's partitions of both pools: 2 x 2 x 2 shards, plus the 2 new ones
    assert listed == 10, f"the second scan listed {listed} keys (the whole history is {written + 2})"
    replay.close()


def test_late_shards_within_the_slack_are_found_and_a_restart_finds_the_rest(any_store: Store) -> None:
    _history(any_store, days=5, pools=("a",), per_day=1)
    replay = _replay(any_store, learner_id="L1")
    assert replay.ingest().shards == 5
    assert replay.catalog.last_since is None  # the first scan lists everything
    yesterday = _put(any_store, "a", TODAY - timedelta(days=1), seed=50)
    too_late = _put(any_store, "a", TODAY - timedelta(days=3), seed=51)  # beyond the 1-day slack
    new_pool = _put(any_store, "c", TODAY, seed=52)  # a pool never seen before: today's partition
    assert replay.ingest().shards == 2
    assert replay.catalog.last_since == TODAY - timedelta(days=1)
    assert {yesterday, new_pool} <= replay.catalog.known and too_late not in replay.catalog.known
    replay.checkpoint()
    replay.close()
    # A restarted learner (a fresh process: in-memory replay, priority snapshot in the store)
    # lists everything once, so the shard beyond the slack is ingested then.
    again = _replay(any_store, learner_id="L1")
    assert again.ingest().shards == 8 and too_late in again.catalog.known
    assert again.episodes == 8
    again.close()


def test_periodic_full_scans_and_a_future_dated_partition(local_store: Store) -> None:
    _history(local_store, days=3, pools=("a",), per_day=1)
    replay = _replay(local_store, discovery_full_scan_every=3)
    assert replay.ingest().shards == 3
    # A collector whose clock runs ahead: its partition is listed, but does not move the bound past today.
    ahead = _put(local_store, "a", TODAY + timedelta(days=30), seed=60)
    assert replay.ingest().shards == 1 and ahead in replay.catalog.known
    today = _put(local_store, "a", TODAY, seed=61)
    too_late = _put(local_store, "a", TODAY - timedelta(days=2), seed=62)
    assert replay.ingest().shards == 1 and today in replay.catalog.known
    assert replay.catalog.last_since == TODAY - timedelta(days=1)
    assert replay.ingest().shards == 1 and too_late in replay.catalog.known  # the 4th scan lists all
    assert replay.catalog.last_since is None
    replay.close()


def test_shards_an_ingest_left_for_later_are_not_lost_to_a_bounded_scan(local_store: Store) -> None:
    written = _history(local_store, days=6, pools=("a",), per_day=2)
    replay = _replay(local_store)
    assert replay.ingest(max_shards=3).shards == 3  # the oldest three; the rest wait for the next ingest
    assert replay.ingest().shards == written - 3
    assert replay.catalog.last_since == TODAY - timedelta(days=1) and replay.episodes == written
    replay.close()


@pytest.mark.parametrize(
    ("field", "value"),
    [("discovery_slack_days", -1), ("discovery_full_scan_every", -2), ("ingest_batch_shards", 0)],
)
def test_bad_discovery_and_batch_settings_name_the_variable(field: str, value: int) -> None:
    with pytest.raises(ValueError, match=f"DISTRL_REPLAY_{field.upper()}"):
        ReplaySettings(**{field: value})
