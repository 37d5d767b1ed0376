"""The MLflow URLs the project prints open on the runs table (tests/integration/test_ui.py checks
them in a browser): the view and the shared columns they name are the ones the experiment holds."""

from __future__ import annotations

import json
from pathlib import Path

from tasks import mlflow_ui


def test_urls_choose_the_model_training_view_and_the_shared_columns() -> None:
    url = mlflow_ui.experiment_url("http://127.0.0.1:5917/", "3")
    assert url == (
        "http://127.0.0.1:5917/#/experiments/3/runs?workflowType=machine_learning&viewStateShareKey=distrl-runs"
    )
    run = mlflow_ui.run_url("sqlite:///x/mlflow.db", "3", "abc")
    assert run == "http://127.0.0.1:5000/#/experiments/3/runs/abc?workflowType=machine_learning"
    assert "mlflow ui --app-name distrl --backend-store-uri sqlite:///x/mlflow.db" in mlflow_ui.serve_hint(
        "sqlite:///x/mlflow.db"
    )
    assert mlflow_ui.serve_hint("http://mlflow:5000") == ""


def test_the_experiment_holds_the_shared_view(tmp_path: Path) -> None:
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("distrl", artifact_location=(tmp_path / "art").as_uri())
    mlflow_ui.prepare_experiment(client, experiment)
    mlflow_ui.prepare_experiment(client, experiment)  # again, as every tracked run does
    tags = client.get_experiment(experiment).tags
    columns = json.loads(tags[f"mlflow.sharedViewState.{mlflow_ui.RUNS_VIEW_KEY}"])["selectedColumns"]
    assert "metrics.`heldout_success`" in columns and "metrics.`actor_loss`" in columns
    assert tags["mlflow.experimentKind"] == "custom_model_development"
