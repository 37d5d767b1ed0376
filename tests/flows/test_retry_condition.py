"""The Prefect tasks that retry do so only for transient errors (`tasks.retry.only_transient`):
a bug fails the task run on its first attempt instead of after every retry and its delays."""

from __future__ import annotations

import pytest
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from tasks.retry import only_transient


def _flaky(errors: list[Exception]):
    calls: list[int] = []

    @task(retries=2, retry_delay_seconds=0, retry_condition_fn=only_transient, cache_policy=NO_CACHE)
    def step() -> str:
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return "done"

    @flow
    def run() -> str:
        return step()

    return run, calls


def test_a_transient_error_is_retried_by_prefect(prefect_api: None) -> None:
    run, calls = _flaky([ConnectionResetError("peer went away")])
    assert run() == "done"
    assert len(calls) == 2


def test_a_bug_fails_the_task_run_at_once(prefect_api: None) -> None:
    run, calls = _flaky([TypeError("unexpected keyword argument")])
    with pytest.raises(TypeError):
        run()
    assert len(calls) == 1


def test_retries_run_out_on_an_error_that_stays_transient(prefect_api: None) -> None:
    run, calls = _flaky([TimeoutError()] * 5)
    with pytest.raises(TimeoutError):
        run()
    assert len(calls) == 3
