"""Addresses in the MLflow UI that open on the runs table with the columns a person watching training
wants, and the experiment tags they rely on.

What MLflow 3.17's UI reads (its JS bundle, not its docs):
- Which view a page opens in comes from the `workflowType` URL parameter, else from the
  browser's localStorage (`mlflow.workflowType_v1`), else "genai" (the GenAI overview: traces,
  "Detect Issues"; run pages titled "Evaluations"; no Model registry in the sidebar). The
  `mlflow.experimentKind` tag is read only by the experiment's landing redirect
  (`#/experiments/<id>`), so every URL the project prints or links carries
  `workflowType=machine_learning`. MLflow's own links (a run's name in the runs table, the
  sidebar) drop the parameter, and no server-side setting or tag of 3.17 changes the stored
  choice: only the sidebar's "GenAI / Model training" switch writes it, and from then on every
  page of that browser stays in the view chosen. So the server `distrl up` starts (and
  `mlflow ui --app-name distrl`) serves a page that stores the model-training view for a browser
  that chose none (tasks/mlflow_ui_app.py).
- The runs table shows the columns of the browser's saved view, by default none of the metrics.
  A shared view is the one server-side way to choose them: the experiment tag
  `mlflow.sharedViewState.<key>` holds the view as JSON and `viewStateShareKey=<key>` applies it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mlflow import MlflowClient

# Older MLflow 3 releases choose the view from this tag; 3.17 from the URL (module docstring).
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
WORKFLOW_PARAM = "workflowType=machine_learning"
RUNS_VIEW_KEY = "distrl-runs"
SHARED_VIEW_TAG = f"mlflow.sharedViewState.{RUNS_VIEW_KEY}"
# One column per role's headline numbers: evaluation, collectors, learner.
RUNS_VIEW_METRICS = (
    "heldout_success",
    "rolling_success",
    "episodes_per_hour",
    "actor_loss",
    "entropy",
    "rho_mean",
    "policy_lag_mean",
    "replay_steps",
    "learner_updates_total",
)
# What `mlflow ui` serves when the tracking URI is a database rather than a server.
LOCAL_UI = "http://127.0.0.1:5000"


def runs_view_state() -> dict[str, object]:
    """The shared view: the metric columns above (the rest as the UI's defaults: newest runs first)."""
    return {"selectedColumns": [f"metrics.`{name}`" for name in RUNS_VIEW_METRICS]}


def prepare_experiment(client: MlflowClient, experiment_id: str) -> None:
    """Tag the experiment so that the URLs below open on its runs table (idempotent)."""
    client.set_experiment_tag(experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    client.set_experiment_tag(experiment_id, SHARED_VIEW_TAG, json.dumps(runs_view_state()))


def ui_base(tracking_uri: str) -> str:
    """The UI's address: the tracking server's own, or `mlflow ui`'s for a database URI."""
    uri = tracking_uri.rstrip("/")
    return uri if uri.startswith(("http://", "https://")) else LOCAL_UI


def serve_hint(tracking_uri: str) -> str:
    """How to open the URLs of a database URI (empty for a tracking server, which serves them)."""
    if tracking_uri.startswith(("http://", "https://")):
        return ""
    return f" (after `{local_ui_command(tracking_uri)}`)"


def local_ui_command(tracking_uri: str) -> str:
    """`mlflow ui` for a database URI, with the app whose pages stay in the model-training view."""
    from tasks.mlflow_ui_app import APP_NAME

    return f"mlflow ui --app-name {APP_NAME} --backend-store-uri {tracking_uri}"


def experiment_url(tracking_uri: str, experiment_id: str) -> str:
    """The experiment's runs table with the shared view's columns."""
    return (
        f"{ui_base(tracking_uri)}/#/experiments/{experiment_id}/runs"
        f"?{WORKFLOW_PARAM}&viewStateShareKey={RUNS_VIEW_KEY}"
    )


def run_url(tracking_uri: str, experiment_id: str, run_id: str) -> str:
    """A run's page (its metrics, parameters and charts) in the model-training view."""
    return f"{ui_base(tracking_uri)}/#/experiments/{experiment_id}/runs/{run_id}?{WORKFLOW_PARAM}"
