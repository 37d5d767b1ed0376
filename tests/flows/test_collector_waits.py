"""A collector started before the first policy version says that it waits once, then once a minute,
not on every registry poll."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import flows.collect
from flows.collect import collect
from tasks.collector import CollectorParams, poll_policy_version

WAITING = "no policy version yet"


def _wait_for_nothing(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> tuple[int, int]:
    """A 3-second collector on an empty registry, polling every 50 ms: (polls, waiting lines)."""
    polls = []
    monkeypatch.setattr(flows.collect, "POLL_WAIT_S", 0.05)
    monkeypatch.setattr(
        flows.collect, "poll_policy_version", lambda s: polls.append(1) or poll_policy_version(s)
    )
    with caplog.at_level(logging.INFO, logger="prefect.flow_runs"):
        result = collect(CollectorParams(num_envs=1, max_minutes=0.05))
    assert result["episodes"] == 0
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
