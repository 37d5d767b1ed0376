"""What a person sees of the flows in the Prefect and MLflow UIs: run names from the parameters,
task runs that are blocks of work (not one per batch or per idle poll), MLflow runs with their
parameters and a link to their flow run, and the held-out learning curve (step = policy version)."""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

import pytest

from flows.collect import collect, next_batches
from flows.evaluate import evaluate
from flows.learn import learn
from simulators.warm_start import WarmStartConfig
from storage.registry import PolicyRegistry
from storage.replay_config import ReplaySettings
from tasks.collector import CollectorParams
from tasks.learner import LearnerParams
from tasks.mlflow_ui import EXPERIMENT_KIND, EXPERIMENT_KIND_TAG, SHARED_VIEW_TAG
from tasks.warm_start import warm_start_policy


def test_a_task_run_spans_about_task_run_seconds_of_batches() -> None:
    params = CollectorParams(task_run_seconds=20.0, episodes_per_batch=8)
    assert next_batches(params, None, 0) == 1  # the first one measures the pace
    assert next_batches(params, 0.8, 8) == 25  # 25 batches of 0.8 s: 20 s
    assert next_batches(params, 60.0, 8) == 1  # a slow batch is a task run of its own
    assert next_batches(params.model_copy(update={"max_episodes": 40}), 0.8, 16) == 3  # 24 episodes left
    assert next_batches(params, 0.8, 8, seconds_left=4.0) == 5  # planned to end with the run
    assert next_batches(params.model_copy(update={"task_run_seconds": 0.0}), 0.8, 8) == 1


def _run(flow, *args, **kwargs) -> tuple[object, UUID]:
    state = flow(*args, return_state=True, **kwargs)
    return state.result(), state.state_details.flow_run_id


def _task_run_names(flow_run_id: UUID) -> list[str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
        return sorted(run.name for run in runs)


def _artifacts(key: str) -> list:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        return client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))


def _flow_run_name(flow_run_id: UUID) -> str:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(flow_run_id).name


@pytest.mark.slow
def test_runs_are_named_and_grouped_and_the_learning_curve_is_one_series(embedded_home: Path) -> None:
    warm_start_policy.fn(WarmStartConfig(family="general", updates=2))
    registry = PolicyRegistry()

    # A collector: 24 episodes in batches of 8, task runs of up to ~1000 s: two task runs of collection.
    collector = CollectorParams(
        pool="pool_a", collector_id="a0", family="general", max_episodes=24, task_run_seconds=1000.0
    )
    result, collect_id = _run(collect, collector)
    assert result["episodes"] == 24
    assert _flow_run_name(collect_id) == "collect-pool_a-a0"
    names = _task_run_names(collect_id)
    assert names == ["collect 16 episodes (v1)", "collect 8 episodes (v1)", "flush shard", "load v1"], names
    (run,) = registry.client.search_runs([registry.experiment_id()], "tags.role = 'collector'")
    assert run.data.params["pool"] == "pool_a" and run.data.params["episodes_per_batch"] == "8"
    assert run.data.tags["prefect.flow_run_id"] == str(collect_id)
    assert "rolling_success" in run.data.metrics
    (warm,) = registry.client.search_runs([registry.experiment_id()], "tags.role = 'warm_start'")
    assert warm.data.params["warm_start.updates"] == "2"
    experiment = registry.client.get_experiment(registry.experiment_id())
    assert experiment.tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND  # opens as a training experiment
    assert "metrics.`rolling_success`" in experiment.tags[SHARED_VIEW_TAG]  # with the useful columns

    # A learner publishing every 2 updates although a block is 8: publish_every_updates is honoured.
    learner = LearnerParams(batch_size=4, updates_per_block=8, publish_every_updates=2, max_updates=4)
    replay = ReplaySettings(min_size_steps=1, samples_per_insert=None)
    result, learn_id = _run(learn, learner, replay)
    assert result["published"] == [2, 3]
    assert _flow_run_name(learn_id) == "learn-aride-4-updates"
    names = _task_run_names(learn_id)
    assert names == [
        *["checkpoint priorities"] * 2,
        *["publish v2", "publish v3", "train_block 1-2", "train_block 3-4"],
    ], names

    # An idle learner (the replay below its minimum for its whole run) makes no task run at all.
    idle = LearnerParams(max_minutes=0.1, idle_sleep_s=0.5)
    _, idle_id = _run(learn, idle, ReplaySettings(min_size_steps=ReplaySettings().capacity_steps))
    assert _task_run_names(idle_id) == []

    # Two evaluations, by version number and by alias: one learning-curve series, step = version.
    _, eval_id = _run(evaluate, 2, family="general")
    assert _flow_run_name(eval_id) == "evaluate-v2"
    _, eval_id = _run(evaluate, "latest", family="general")
    assert _flow_run_name(eval_id) == "evaluate-v3"  # renamed once the alias is resolved
    (curve,) = registry.client.search_runs([registry.experiment_id()], "tags.role = 'learning_curve'")
    history = registry.client.get_metric_history(curve.info.run_id, "heldout_success")
    assert [point.step for point in history] == [2, 3]
    assert {"heldout_ci_low_general", "heldout_ci_high_general"} <= set(curve.data.metrics)
    evaluation = registry.client.search_runs([registry.experiment_id()], "tags.role = 'evaluation'")[0]
    assert evaluation.data.params["split"] == "test" and evaluation.data.tags["prefect.flow_run_id"]
    # Prefect artifacts: the curve as a table, and progress bars of the bounded runs, at 100%.
    tables = _artifacts("heldout-learning-curve")
    assert any(t.type == "table" and "v2" in str(t.data) and "v3" in str(t.data) for t in tables), tables
    for key in ("collect-pool-a-a0", "learn"):  # one per bounded run, each at 100 when it ended
        found = _artifacts(key)
        assert found and all(a.type == "progress" and float(a.data) == 100.0 for a in found), (key, found)
    # The curve is the learner's (the run that published v2 and v3); the learner's own run keeps one
    # x-axis meaning per metric (step = update) and holds no held-out series.
    learner_run = registry.client.get_model_version(registry.name, "3").run_id
    assert curve.data.tags["training_run"] == learner_run
    assert registry.client.get_metric_history(learner_run, "heldout_success") == []
