"""A damaged priority snapshot never stops a learner from starting.

Each kind of damage is written over a real snapshot (`Replay.checkpoint`) in a local store; the next
replay must start, set the file aside as `<name>.bad-<timestamp>` with a warning naming it, and give
every trajectory the shards' initial priority.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from bench.integrity_probes import damaged_snapshots
from storage.replay import Replay
from storage.replay_config import ReplaySettings
from storage.store import Store, atomic_put
from tests.reliability.conftest import fill

KINDS = ["truncated", "garbage", "empty", "missing_column", "non_numeric_version", "huge_sampled_steps"]


def _replay(store: Store) -> Replay:
    return Replay(store, ReplaySettings(min_size_steps=1, samples_per_insert=4.0, learner_id="L1"))


@pytest.mark.parametrize("kind", KINDS)
def test_a_damaged_snapshot_is_set_aside_and_the_learner_starts_fresh(
    local_store: Store, kind, caplog
) -> None:
    ids = fill(local_store, 12)
    first = _replay(local_store)
    first.ingest()
    batch = first.sample(4)
    first.update_priorities(batch.slots, np.full(4, 9.0))
    first.checkpoint()
    first.close()
    path = first.snapshot_path
    with local_store.fs.open(path, "rb") as fh:
        good = fh.read()
    atomic_put(local_store, path, damaged_snapshots(good)[kind])

    with caplog.at_level(logging.WARNING, logger="storage.replay"):
        second = _replay(local_store)
    second.ingest()
    aside = local_store.fs.glob(f"{path}.bad-*")
    assert len(aside) == 1 and not local_store.fs.exists(path)
    warning = next(r.getMessage() for r in caplog.records if "set aside" in r.getMessage())
    assert path in warning and aside[0] in warning
    initial = second.config.initial_priority
    assert set(second.priorities_of(ids).values()) == {initial}
    assert second.limiter.sampled == 0
    second.sample(4)  # sampling works (a restored 10^15 sampled steps made every sample ReplayNotReady)
    second.close()
