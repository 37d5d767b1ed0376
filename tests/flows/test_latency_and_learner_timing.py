"""Per-episode emulator latency spread, and the learner's timing (duty cycle, batch prefetch)."""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from distrl_core.learner.batch import StepBatch
from storage.replay import ReplayNotReady
from tasks.collector import CollectorParams
from tasks.collector_envs import make_collector_envs
from tasks.learner import LearnerParams, LearnerSession, LearnerTiming, ingest_shards, train_block


def _latency_scales(sigma: float, seed: int, resets: int = 300) -> list[float]:
    params = CollectorParams(num_envs=1, family="general", step_latency_s=0.5, task_latency_sigma=sigma)
    (env,) = make_collector_envs(params, random.Random(seed))
    scales = []
    for i in range(resets):
        env.reset(seed=i)
        scales.append(env.device.faults.latency_scale_s)
    return scales


def test_task_latency_sigma_spreads_episode_latency_about_100x() -> None:
    scales = sorted(_latency_scales(1.0, seed=0))
    p1, p50, p99 = (scales[int(q * (len(scales) - 1))] for q in (0.01, 0.5, 0.99))
    assert 30 < p99 / p1 < 400, (p1, p99)  # lognormal(sigma=1): ~100x between the 1st and 99th
    assert 0.3 < p50 < 0.8  # around the median step latency
    assert _latency_scales(1.0, seed=0) == _latency_scales(1.0, seed=0)  # seeded
    assert set(_latency_scales(0.0, seed=0, resets=20)) == {0.5}  # off: the fixed median


def _numbered_rows(number: int, trajectories: int) -> list[dict]:
    """One-step trajectories whose episode ids carry the draw's number."""
    return [
        {
            "episode_id": f"{number}/{i}",
            "step": 0,
            "instruction": "open settings",
            "observation_text": "home",
            "raw_output": "tap 1",
            "action": "tap 1",
            "action_valid": True,
            "reward": 0.0,
            "done": True,
            "episode_success": False,
            "behaviour_logprob": -1.0,
            "action_token_count": 2,
            "policy_version": 1,
            "sample_idx": i,
        }
        for i in range(trajectories)
    ]


class _FakeReplay:
    """Counts draws; not ready until `ready` is set; batches are numbered in draw order."""

    def __init__(self) -> None:
        self.ready = False
        self.draws = 0
        self.lock = threading.Lock()
        self.size_steps = 100

    def sample(self, batch_size: int, *, beta: float, window: int | None) -> SimpleNamespace:
        with self.lock:
            if not self.ready:
                raise ReplayNotReady("below min_size_steps")
            self.draws += 1
            number = self.draws
        return SimpleNamespace(
            slots=np.arange(batch_size),
            is_weights=np.ones(batch_size),
            steps=_numbered_rows(number, batch_size),
        )

    def update_priorities(self, slots: np.ndarray, priorities: np.ndarray) -> None:
        pass


class _FakeLearner:
    def __init__(self) -> None:
        self.updates = 0
        self.seen: list[int] = []
        self.metrics: list[dict[str, float]] = []  # what each update reports, in turn (default: a loss)

    def beta_at(self) -> float:
        return 1.0

    def update(self, batch: StepBatch) -> tuple[dict, np.ndarray]:
        self.seen.append(int(batch.episode_ids[0].split("/")[0]))
        self.updates += 1
        time.sleep(0.01)
        return (self.metrics.pop(0) if self.metrics else {"loss": 0.5}), np.ones(batch.size)


def _open_fake_learner() -> tuple[LearnerSession, _FakeReplay, _FakeLearner]:
    replay, learner = _FakeReplay(), _FakeLearner()
    registry = SimpleNamespace(client=SimpleNamespace(log_batch=lambda *a, **k: None))
    session = LearnerSession(
        LearnerParams(updates_per_block=3, batch_size=2), replay, learner, registry, "run", 1
    )
    return session, replay, learner


def test_train_block_prefetches_the_next_batch_and_uses_it_in_order() -> None:
    session, replay, learner = _open_fake_learner()
    try:
        waiting = train_block.fn(session)
        assert waiting["waiting"] == 1.0 and waiting["updates"] == 0
        assert session.clock.first_update_at is None  # still warming up
        replay.ready = True
        first = train_block.fn(session)
        assert first["updates"] == 3.0 and session.prefetch is not None
        assert replay.draws == 4  # three used, one drawn ahead for the next block
        train_block.fn(session)
        assert replay.draws == 7  # the prefetched batch was used, not drawn again
        assert learner.seen == [1, 2, 3, 4, 5, 6]  # in draw order, none skipped
        timing = session.timing()
        assert timing["updates"] == 6 and timing["busy_s"] > 0
        assert timing["steady_duty_cycle"] >= timing["duty_cycle"]
    finally:
        session.sampler.shutdown(wait=True)


def test_each_block_logs_one_line_with_its_numbers(
    prefect_api: None, caplog: pytest.LogCaptureFixture
) -> None:
    from prefect import flow

    session, replay, learner = _open_fake_learner()
    replay.ready = True
    stats = {"actor_loss": 0.25, "critic_loss": 0.5, "entropy": 1.5, "policy_lag_mean": 2.0}
    learner.metrics = [
        stats | {"rho_mean": rho, "rho_clipped_fraction": clipped}
        for rho, clipped in ((0.5, 0.0), (1.0, 0.5), (1.5, 1.0))
    ]

    @flow
    def one_block() -> dict[str, float]:
        return train_block(session)

    try:
        with caplog.at_level(logging.INFO, logger="prefect.task_runs"):
            assert one_block()["updates"] == 3.0
    finally:
        session.sampler.shutdown(wait=True)
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.name == "prefect.task_runs" and "updates 1-3" in r.getMessage()
    ]
    assert len(lines) == 1, caplog.text
    expected = "updates 1-3: actor loss 0.250, critic loss 0.500, entropy 1.50, rho 1.00, rho > rho_max 50%, policy lag 2.0, replay 100 steps, "
    assert lines[0].startswith(expected), lines[0]
    assert re.fullmatch(r"[0-9.]+ updates/s", lines[0].removeprefix(expected)), lines[0]


def test_timing_separates_the_replay_warm_up() -> None:
    session = LearnerSession(
        LearnerParams(), None, SimpleNamespace(updates=10), None, "run", 1, clock=LearnerTiming(busy_s=9.0)
    )
    now = time.monotonic()
    session.clock.started, session.clock.first_update_at = now - 20.0, now - 10.0
    timing = session.timing()
    session.sampler.shutdown()
    assert abs(timing["duty_cycle"] - 0.45) < 0.02  # 9 s busy of 20 s since it opened
    assert abs(timing["steady_duty_cycle"] - 0.9) < 0.05  # of the 10 s since the first update
    assert abs(timing["warmup_s"] - 10.0) < 0.5


def test_background_ingest_reports_the_last_finished_scan_and_its_errors() -> None:
    session, replay, _ = _open_fake_learner()
    session.params = LearnerParams(background_ingest=True)
    scans = {"n": 0}

    def ingest():
        scans["n"] += 1
        if scans["n"] == 3:
            raise OSError("store unreachable")
        return SimpleNamespace(shards=scans["n"], episodes=2)

    replay.ingest = ingest
    try:
        first = ingest_shards.fn(session)
        assert "shards" not in first and first["replay_steps"] == 100  # nothing finished yet
        session.ingesting.result(timeout=10)
        second = ingest_shards.fn(session)
        assert second["shards"] == 1  # the first scan's report; a second scan started
        session.ingesting.exception(timeout=10)
        assert ingest_shards.fn(session)["shards"] == 2
        session.ingesting.exception(timeout=10)
        with pytest.raises(OSError, match="store unreachable"):
            ingest_shards.fn(session)
        assert ingest_shards.fn(session)["shards"] == 2  # a retry starts a fresh scan
        assert session.timing()["ingest_s"] == 0.0  # the learner never waited for a scan
    finally:
        session.sampler.shutdown(wait=True)
        session.ingester.shutdown(wait=True)


def test_a_collector_that_fails_is_started_again_until_the_run_stops(monkeypatch) -> None:
    import flows.train_local as train_local_module
    from tasks.collector import CollectorParams
    from tasks.stop import StopToken

    calls: list[str] = []

    def flaky_collect(params, stop_id):
        calls.append(stop_id)
        if len(calls) == 1:
            raise RuntimeError("503 Service Unavailable")
        return {"episodes": 3}

    # The collector flow itself is replaced: no real one fails once and then succeeds on demand.
    monkeypatch.setattr(train_local_module, "collect", flaky_collect)
    stop, results = StopToken(), {}
    try:
        train_local_module._collector_thread(CollectorParams(collector_id="c7"), stop, results, backoff_s=0)
        assert results == {"collector_c7": {"episodes": 3}} and len(calls) == 2
        stop.set()  # a failure while the run is stopping is not retried
        calls.clear()
        with pytest.raises(RuntimeError, match="503"):
            train_local_module._collector_thread(
                CollectorParams(collector_id="c8"), stop, results, backoff_s=0
            )
        assert len(calls) == 1
    finally:
        stop.close()
