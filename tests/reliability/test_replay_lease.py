"""One learner per replay: the lease in the store (storage/lease.py), on a local folder and on S3
(moto, with its conditional PUT and DELETE). A second holder waits or refuses with one line naming
the first; a lease whose holder stopped renewing is taken over, and the old holder finds out."""

from __future__ import annotations

import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from storage.lease import Holder, LeaseHeld, LeaseLost, LeaseSettings, ReplayLease
from storage.store import Store


def _lease(store: Store, run: str, *, ttl_s: float = 30.0, wait_s: float = 0.0) -> ReplayLease:
    return ReplayLease(
        store, "learner", Holder("host-a", 4242, run), LeaseSettings(ttl_s=ttl_s, wait_s=wait_s)
    )


def test_a_second_learner_refuses_with_the_holder_and_the_expiry(any_store: Store) -> None:
    first = _lease(any_store, "run-first").acquire()
    try:
        with pytest.raises(LeaseHeld) as refused:
            _lease(any_store, "run-second").acquire()
        message = str(refused.value)
        assert "\n" not in message
        assert "run run-first (pid 4242 on host-a)" in message and " UTC" in message, message
        assert "DISTRL_REPLAY_LEARNER_ID" in message
        first.check()  # the refused contender changed nothing
    finally:
        first.release()
    second = _lease(any_store, "run-second").acquire()  # released: free at once
    second.release()
    assert not any_store.fs.exists(first.path)


def test_a_waiting_learner_gets_the_lease_when_the_holder_releases(any_store: Store) -> None:
    first = _lease(any_store, "run-first").acquire()
    threading.Timer(0.5, first.release).start()
    second = _lease(any_store, "run-second", wait_s=60).acquire()
    try:
        record = json.loads(any_store.fs.cat_file(second.path))
        assert record["holder"]["run_id"] == "run-second" and record["token"] == second.token
    finally:
        second.release()


def test_a_stale_lease_is_taken_over_and_its_old_holder_stops(any_store: Store, caplog) -> None:
    dead = _lease(any_store, "run-killed", ttl_s=0.5).acquire()
    dead._stop.set()  # a killed process: no more renewals
    dead._renewer.join(timeout=5)
    with caplog.at_level(logging.WARNING, logger="storage.lease"):
        heir = _lease(any_store, "run-heir", wait_s=30).acquire()
    try:
        assert any("took over" in r.getMessage() and "run-killed" in r.getMessage() for r in caplog.records)
        with pytest.raises(LeaseLost):
            dead.renew()
        with pytest.raises(LeaseLost):
            dead.check()  # expired without renewal: no publish, no snapshot
        heir.check()
        dead.release()  # not its lease any more: left alone
        assert json.loads(any_store.fs.cat_file(heir.path))["token"] == heir.token
    finally:
        heir.release()


def test_a_held_lease_is_renewed_and_outlives_its_ttl(any_store: Store) -> None:
    holder = _lease(any_store, "run-long", ttl_s=0.6).acquire()
    try:
        first_expiry = holder.expires_at
        deadline = time.monotonic() + 30
        while holder.expires_at == first_expiry and time.monotonic() < deadline:
            time.sleep(0.05)
        assert holder.expires_at > first_expiry  # the renewer pushed it ahead
        with pytest.raises(LeaseHeld):
            _lease(any_store, "run-other").acquire()
        holder.check()
    finally:
        holder.release()


def test_an_unreadable_lease_file_is_taken_over(any_store: Store) -> None:
    from storage.store import atomic_put

    path = _lease(any_store, "x").path
    atomic_put(any_store, path, b"{not json")
    lease = _lease(any_store, "run-after-damage").acquire()
    lease.release()


def test_of_many_simultaneous_contenders_exactly_one_wins(any_store: Store) -> None:
    start = threading.Barrier(6)

    def contend(i: int) -> ReplayLease | None:
        start.wait()
        try:
            return _lease(any_store, f"run-{i}").acquire()
        except LeaseHeld:
            return None

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(contend, range(6)))
    winners = [lease for lease in results if lease is not None]
    assert len(winners) == 1
    winners[0].check()
    winners[0].release()
