"""A collector started before the first policy version says that it waits once, then once a minute,
not on every registry poll; its `max_minutes` of collecting start with that version (a slow warm
start does not use them up), and `max_wait_minutes` bounds the wait with a failure that says why."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import pytest

import flows.collect
from distrl_core.policy import save_policy
from distrl_core.policy.config import PolicyConfig
from distrl_core.policy.model import Policy
from flows.collect import NoPolicyVersion, collect
from storage.registry import PolicyRegistry
from tasks.collector import CollectorParams, CollectorSession, poll_policy_version

WAITING = "no policy version yet"


def _wait_for_nothing(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> tuple[int, int]:
    """A collector that waits at most 3 s on an empty registry, polling every 50 ms: (polls, waiting lines)."""
    polls = []
    monkeypatch.setattr(flows.collect, "POLL_WAIT_S", 0.05)
    monkeypatch.setattr(
        flows.collect, "poll_policy_version", lambda s: polls.append(1) or poll_policy_version(s)
    )
    with (
        caplog.at_level(logging.INFO, logger="prefect.flow_runs"),
        pytest.raises(NoPolicyVersion, match=r"no policy version for alias 'latest' after 0.05 minutes"),
    ):
        collect(CollectorParams(num_envs=1, max_minutes=0.01, max_wait_minutes=0.05))
    return len(polls), sum(WAITING in r.getMessage() for r in caplog.records)


def test_waiting_for_the_first_version_is_said_once_a_minute(
    embedded_home: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    polls, lines = _wait_for_nothing(monkeypatch, caplog)
    assert polls > 5 and lines == 1, (polls, lines)
    assert "waiting (0 s so far, checking every 0.05 s)" in caplog.text

    caplog.clear()
    monkeypatch.setattr(flows.collect, "WAITING_LOG_EVERY_S", 0.0)  # a minute that lasts no time
    polls, lines = _wait_for_nothing(monkeypatch, caplog)
    assert lines == polls > 5


def _publish_untrained_policy() -> None:
    """Version 1, as a slow warm start would publish it."""
    registry = PolicyRegistry()
    with tempfile.TemporaryDirectory() as tmp:
        path = save_policy(Policy.create(PolicyConfig()), Path(tmp) / "policy")
        registry.publish(path, run_id=registry.start_run("warm-start"))


def test_the_wait_for_version_1_is_not_part_of_the_collecting_budget(
    embedded_home: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Version 1 appears at the 40th poll, after at least 39 waits of 50 ms (the wait is counted in
    # polls, not wall time, so a loaded machine cannot shorten it); the budget (0.6 s) would have
    # run out long before: counted from the start, the collector would end Completed with 0 episodes.
    polls: list[int] = []

    def poll_then_publish(session: CollectorSession) -> int | None:
        polls.append(1)
        if len(polls) == 40:
            _publish_untrained_policy()
        return poll_policy_version(session)

    monkeypatch.setattr(flows.collect, "POLL_WAIT_S", 0.05)
    monkeypatch.setattr(flows.collect, "poll_policy_version", poll_then_publish)
    with caplog.at_level(logging.INFO, logger="prefect.flow_runs"):
        result = collect(
            CollectorParams(num_envs=1, episodes_per_batch=2, max_minutes=0.01, family="general")
        )
    assert result["episodes"] >= 2, result
    started = [r.getMessage() for r in caplog.records if "budget (max_minutes) starts now" in r.getMessage()]
    assert len(started) == 1 and started[0].startswith("collecting with version 1 after "), started
    waited = float(started[0].split(" after ")[1].split(" s ")[0])
    assert waited >= 1.5 and len(polls) >= 40, (started, len(polls))
