"""MLflow's tracking server with its UI opening in the model-training view: `mlflow server --app-name distrl`
(or `mlflow ui --app-name distrl`), which `distrl up` starts.

MLflow 3.17's UI shows each page in the view that the URL's `workflowType` names, else in the one the
browser saved, else in its GenAI view (tasks/mlflow_ui.py). Its own links — a run's name in the runs
table, the sidebar — drop the parameter, so a person who opens a run from the table lands in the
GenAI view ("Evaluations") and stays there on the registry's pages. No tag or server setting of 3.17
changes that default; only the page can. This app is MLflow's own server (the same Flask app, served
through MLflow's FastAPI app under uvicorn, as `mlflow server` does) whose page first saves
"machine_learning" as the browser's choice when it has none. The sidebar's GenAI / Model training
switch still writes that choice, and a browser keeps whatever it chose.

Registered in pyproject.toml as the `mlflow.app` entry point `distrl`, as MLflow's own `basic-auth`
app is. A team server with users and permissions takes `--app-name distrl-basic-auth`: MLflow's
`basic-auth` app (its `MLFLOW_AUTH_CONFIG_PATH`, users, permissions) with the same page.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flask import Flask, Response

APP_NAME = "distrl"  # the entry point's name: `mlflow server --app-name distrl`
AUTH_APP_NAME = "distrl-basic-auth"  # MLflow's basic-auth app with the same page
STORED_CHOICE_KEY = "mlflow.workflowType_v1"  # where 3.17's UI keeps the view a browser chose
MODEL_TRAINING = "machine_learning"
# The stored value is JSON, as the UI writes it; on the first visit only, so a choice is never undone.
_KEY = json.dumps(STORED_CHOICE_KEY)
DEFAULT_VIEW_SCRIPT = (
    f"<script>try{{if(localStorage.getItem({_KEY})===null)"
    f"localStorage.setItem({_KEY},{json.dumps(json.dumps(MODEL_TRAINING))})}}catch(e){{}}</script>"
)
_INDEX_ENDPOINT = "serve"  # MLflow's route of the UI's page (index.html)


def with_default_view(html: str) -> str:
    """The UI's page with the script first in its head, before MLflow's bundle reads the choice."""
    head = html.find("<head>")
    if head < 0:
        raise ValueError("MLflow's index.html has no <head>: this MLflow's UI is not the one this app knows")
    at = head + len("<head>")
    return html[:at] + DEFAULT_VIEW_SCRIPT + html[at:]


def _default_view(response: Response) -> Response:
    from flask import request

    if request.endpoint != _INDEX_ENDPOINT or response.status_code != 200 or response.mimetype != "text/html":
        return response
    response.direct_passthrough = False  # a file response: read it to rewrite it
    response.set_data(with_default_view(response.get_data(as_text=True)))
    # The page's validators describe the file on disk, not this page: a browser must not answer a
    # 304 with a page cached from a plain `mlflow server` on the same address.
    for header in ("ETag", "Last-Modified"):
        response.headers.pop(header, None)
    response.headers["Cache-Control"] = "no-cache"
    return response


def _with_default_view(app: Flask | None) -> Flask:
    from mlflow.server import app as mlflow_app

    flask_app = app or mlflow_app
    if _default_view not in flask_app.after_request_funcs.get(None, []):  # once per app, however often called
        flask_app.after_request(_default_view)
    return flask_app


def create_auth_app(app: Flask | None = None) -> object:
    """`--app-name distrl-basic-auth`: MLflow's basic-auth app (it asks for credentials before any
    page, ours included) over the Flask app with the page rewritten; ASGI or WSGI as MLflow's own."""
    from mlflow.server.auth import create_app as create_basic_auth_app

    return create_basic_auth_app(_with_default_view(app))


def create_app(app: Flask | None = None) -> object:
    """The entry point MLflow's `--app-name` calls: its Flask app with the page rewritten, as the ASGI
    app uvicorn serves (or the Flask app itself under gunicorn or waitress)."""
    flask_app = _with_default_view(app)
    from mlflow.environment_variables import _MLFLOW_SGI_NAME

    if _MLFLOW_SGI_NAME.get() == "uvicorn":
        from mlflow.server.fastapi_app import create_fastapi_app

        return create_fastapi_app(flask_app)
    return flask_app


def registered() -> bool:
    """Whether this install registers the app (an editable install older than the entry point does not)."""
    from importlib.metadata import entry_points

    return any(ep.value == f"{__name__}:create_app" for ep in entry_points(group="mlflow.app", name=APP_NAME))


def require_registered() -> None:
    if not registered():
        raise RuntimeError(
            f"MLflow finds no app {APP_NAME!r} (`mlflow server --app-name {APP_NAME}`): this install of the "
            "project predates it; reinstall it (`pip install -e .`, or `make venv`)"
        )
