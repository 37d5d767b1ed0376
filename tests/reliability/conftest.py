"""The outside probe of the store and `distrl sql`, kept as a suite: the store fixtures (local folder, moto S3) of
tests/storage, and a small filled store for the SQL probes."""

from __future__ import annotations

import pytest

from storage.store import Store
from storage.synthetic import write_synthetic_episodes
from tests.storage.conftest import (  # noqa: F401  (fixtures)
    ACCESS_KEY,
    SECRET_KEY,
    any_store,
    aws_env,
    aws_keys,
    local_store,
    moto_endpoint,
    s3_store,
)

JUDGE_CANARY = "sk-judge-canary-7f3e9a1b2c"


def fill(store: Store, episodes: int = 6, *, flush: int = 3, collector: str = "c0") -> list[str]:
    """Write `episodes` synthetic episodes in shards of `flush`; returns their ids."""
    return write_synthetic_episodes(store, episodes, flush=flush, collector=collector)


@pytest.fixture
def canaries(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Secret values that must never reach any output: the judge key (always) and the S3 keys."""
    monkeypatch.setenv("DISTRL_JUDGE_API_KEY", JUDGE_CANARY)
    return [JUDGE_CANARY, SECRET_KEY, ACCESS_KEY]
