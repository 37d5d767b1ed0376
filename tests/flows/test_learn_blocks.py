"""The learn flow's blocks end where a publish is due and at this run's max_updates, also when the
learner resumed a previous run's update count."""

from __future__ import annotations

from types import SimpleNamespace

from flows.learn import _block_size
from tasks.learner import LearnerParams


def _session(updates: int, **params) -> SimpleNamespace:
    return SimpleNamespace(params=LearnerParams(**params), learner=SimpleNamespace(updates=updates))


def test_a_block_ends_at_the_next_publish_and_at_max_updates() -> None:
    session = _session(0, updates_per_block=8, publish_every_updates=20, max_updates=30)
    assert _block_size(session, since_publish=0) == 8
    assert _block_size(session, since_publish=16) == 4  # the publish is due after 4 more
    session.learner.updates = 27
    assert _block_size(session, since_publish=0) == 3


def test_a_resumed_learner_counts_max_updates_from_where_it_resumed() -> None:
    session = _session(500, updates_per_block=8, publish_every_updates=20, max_updates=30)
    assert _block_size(session, since_publish=0, resumed_at=500) == 8
    session.learner.updates = 527
    assert _block_size(session, since_publish=0, resumed_at=500) == 3
