"""The continuous evaluator against a registry that publishes while it runs: every version when it
keeps up, the newest when it cannot, none twice (also across a restart), the curve's three axes
equal to the learner's tags, the curve run finished when training ends, and a champion that does
not move on equal outcomes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from flows.evaluator import evaluator
from simulators.warm_start import WarmStartConfig
from storage.registry import CHAMPION, PolicyRegistry
from tasks.evaluation import PROTOCOL_TAG
from tasks.evaluator import EvaluatorParams
from tasks.heldout_curve import CURVE_ROLE, ENV_STEPS_TAG, SECONDS_TAG, read_curve
from tasks.stop import StopToken
from tasks.warm_start import warm_start_policy

# One greedy episode per held-out General task: a few seconds per version on a tiny policy.
PARAMS = EvaluatorParams(family="general", episodes_per_task=1, poll_seconds=0.2)


def _wait_scored(registry: PolicyRegistry, version: int, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while PROTOCOL_TAG not in registry.tags(version):
        assert time.monotonic() < deadline, f"v{version} was not scored within {timeout_s} s"
        time.sleep(0.2)


def _publish(registry: PolicyRegistry, run_id: str, source: Path, seconds: float, steps: int) -> int:
    # The same weights every time: equal outcomes, so the champion must never move by itself.
    return registry.publish(source, run_id=run_id, tags={SECONDS_TAG: f"{seconds:.3f}", ENV_STEPS_TAG: steps})


@pytest.mark.slow
def test_the_evaluator_follows_a_publishing_registry(embedded_home: Path) -> None:
    warm = warm_start_policy.fn(WarmStartConfig(family="general", updates=2))
    registry = PolicyRegistry()
    source = registry.fetch(warm).path
    learner_run = registry.start_run("learner", tags={"role": "learner", "parent_version": str(warm)})

    # Keeping up: one version at a time, each scored before the next appears.
    token = StopToken()
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(evaluator(PARAMS, token.id)))
    thread.start()
    published = {warm: (0.0, 0)}
    try:
        _wait_scored(registry, warm)
        for i in (1, 2):
            version = _publish(registry, learner_run, source, 10.0 * i, 100 * i)
            published[version] = (10.0 * i, 100 * i)
            _wait_scored(registry, version)
    finally:
        token.set()
        thread.join(timeout=600)
        token.close()
    assert not thread.is_alive()
    assert result["scored"] == [warm, warm + 1, warm + 2] and result["skipped"] == []

    # Falling behind: three versions appear while no evaluator runs (as while it is busy, or
    # down); a restarted evaluator resumes after v3, scores only the newest and names the others.
    burst = [_publish(registry, learner_run, source, 30.0 + i, 300 + i) for i in range(3)]
    published[burst[-1]] = (32.0, 302)
    registry.client.set_terminated(learner_run)  # training ends
    drained = _drain()
    assert drained["scored"] == [burst[-1]] and drained["skipped"] == burst[:-1]
    assert registry.resolve(CHAMPION) == warm  # equal outcomes: the first champion stays

    (curve,) = registry.client.search_runs(
        [registry.experiment_id()], f"tags.role = '{CURVE_ROLE}' and tags.training_run = '{learner_run}'"
    )
    assert curve.info.status == "FINISHED"
    assert curve.info.run_name.startswith("held-out curve of learner")
    points = read_curve(registry, curve.info.run_id)
    assert [p.version for p in points] == sorted(published)
    for point in points:  # the three axes: version (step), seconds and steps from the version's tags
        assert (point.seconds, point.env_steps) == pytest.approx(published[point.version])
        assert 0 <= point.ci_low <= point.success <= point.ci_high <= 1

    # Another restart scores nothing twice.
    assert _drain()["scored"] == []


def _drain() -> dict:
    """One evaluator run that scores what is pending, then stops (its stop token is already set)."""
    token = StopToken()
    token.set()
    try:
        return dict(evaluator(PARAMS, token.id))
    finally:
        token.close()


@pytest.mark.slow
def test_the_embedded_evaluator_process_scores_at_low_priority_and_stops_when_asked(
    embedded_home: Path,
) -> None:
    """train_local's default: the evaluator flow in a child process (no interpreter lock shared
    with the learner) at niceness 19, on this process's Prefect API, registry and store."""
    import psutil

    from flows.embedded_evaluator import EvaluatorProcess

    warm = warm_start_policy.fn(WarmStartConfig(family="general", updates=2))
    registry = PolicyRegistry()
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    def evaluator_runs() -> dict:
        with get_client(sync_client=True) as client:
            runs = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=["evaluator"])))
        return {run.id: run.state.type.value for run in runs}

    earlier = evaluator_runs()
    before = psutil.Process().nice()
    scorer = EvaluatorProcess(PARAMS, nice=19)
    try:
        child = psutil.Process(scorer.process.pid)
        assert child.ppid() == psutil.Process().pid
        deadline = time.monotonic() + 120  # it lowers itself first thing after the interpreter starts
        while child.nice() != 19 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert child.nice() == 19 and psutil.Process().nice() == before  # only the child is lowered
        _wait_scored(registry, warm)  # it reached the registry
        assert child.children() == []  # and this test's Prefect API: no server of its own
    finally:
        result = scorer.finish(timeout_s=300)
    assert result["summary"]["scored"] == [warm], result
    new_runs = [state for run, state in evaluator_runs().items() if run not in earlier]
    assert new_runs == ["COMPLETED"]  # its flow run, on this test's API
    assert scorer.process.returncode == 0


def test_an_aborted_embedded_evaluator_process_stops_without_a_last_evaluation(embedded_home: Path) -> None:
    # train_local unwinding (an error, or SIGTERM caught first by Prefect's handler) must not wait
    # for one more evaluation: a 1 s budget for it would otherwise come back as an error.
    from flows.embedded_evaluator import EvaluatorProcess

    scorer = EvaluatorProcess(PARAMS, nice=0)
    assert scorer.finish(timeout_s=1, abort=True) == {}
    assert scorer.process.returncode is not None


def test_an_embedded_evaluator_process_that_dies_is_reported_not_awaited(embedded_home: Path) -> None:
    from flows.embedded_evaluator import EvaluatorProcess

    scorer = EvaluatorProcess(PARAMS, nice=0)
    scorer.process.kill()
    result = scorer.finish(timeout_s=60)
    assert result["error"] == "the evaluator process exited with code -9", result
    assert scorer.process.poll() == -9
