"""MLflow's server as `distrl up` starts it: the UI's page stores the model-training view for a browser
that chose none, before MLflow's bundle reads it; every other response is MLflow's own.
(tests/integration/test_ui.py clicks through the pages in Chromium.)"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

import httpx
import pytest

from ops.processes import free_port, start, stop_tree, wait_until, without_credentials
from tasks import mlflow_ui_app

ROOT = Path(__file__).resolve().parents[2]


def test_the_script_comes_first_in_the_head() -> None:
    page = '<!doctype html><html><head><meta charset="utf-8"/><script defer src="main.js"></script></head></html>'
    rewritten = mlflow_ui_app.with_default_view(page)
    assert rewritten.startswith("<!doctype html><html><head><script>")
    assert rewritten.index(mlflow_ui_app.DEFAULT_VIEW_SCRIPT) < rewritten.index("main.js")
    # Stored as MLflow's UI stores it (JSON), and only where the browser has no choice yet.
    assert '"mlflow.workflowType_v1"' in rewritten and '"\\"machine_learning\\""' in rewritten
    assert "===null" in rewritten
    with pytest.raises(ValueError, match="no <head>"):
        mlflow_ui_app.with_default_view("<html><body></body></html>")


def test_mlflows_page_carries_the_script_and_nothing_else_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("_MLFLOW_SGI_NAME", raising=False)  # the Flask app itself (as under gunicorn)
    app = mlflow_ui_app.create_app()
    assert app is mlflow_ui_app.create_app()  # a second call adds no second rewrite
    client = app.test_client()
    page = client.get("/")
    body = page.get_data(as_text=True)
    assert page.status_code == 200 and body.count(mlflow_ui_app.DEFAULT_VIEW_SCRIPT) == 1
    assert body.index(mlflow_ui_app.DEFAULT_VIEW_SCRIPT) < body.index("static-files/static/js/main")
    assert int(page.headers["Content-Length"]) == len(page.get_data())
    assert "ETag" not in page.headers and page.headers["Cache-Control"] == "no-cache"
    health = client.get("/health")
    assert health.status_code == 200 and mlflow_ui_app.DEFAULT_VIEW_SCRIPT not in health.get_data(
        as_text=True
    )


def test_pyproject_registers_the_app_under_its_name() -> None:
    entry_points = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert entry_points["mlflow.app"][mlflow_ui_app.APP_NAME] == f"{mlflow_ui_app.__name__}:create_app"


def test_pyproject_registers_the_basic_auth_variant() -> None:
    entry_points = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert (
        entry_points["mlflow.app"][mlflow_ui_app.AUTH_APP_NAME] == f"{mlflow_ui_app.__name__}:create_auth_app"
    )


@pytest.mark.slow  # a real `mlflow server` (its own process: basic-auth rewires the app it is given)
def test_the_basic_auth_variant_asks_for_credentials_then_serves_the_page(tmp_path: Path) -> None:
    (tmp_path / "auth.ini").write_text(
        "[mlflow]\ndefault_permission = READ\n"
        f"database_uri = sqlite:///{tmp_path / 'users.db'}\nadmin_username = admin\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
    )
    port = free_port()
    env = without_credentials(os.environ) | {
        "MLFLOW_AUTH_CONFIG_PATH": str(tmp_path / "auth.ini"),
        "MLFLOW_AUTH_ADMIN_PASSWORD": "a-long-test-password-1",
        "MLFLOW_FLASK_SERVER_SECRET_KEY": "test-secret",
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
    }
    argv = [sys.executable, "-m", "mlflow", "server", "--app-name", mlflow_ui_app.AUTH_APP_NAME]
    argv += ["--backend-store-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "--host", "127.0.0.1"]
    server = start(
        "mlflow", [*argv, "--port", str(port), "--workers", "1"], env=env, log_path=tmp_path / "log"
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_until(
            lambda: httpx.get(url, timeout=2.0).status_code == 401, what="mlflow", timeout_s=240, proc=server
        )
        stranger = httpx.get(url, timeout=10.0)  # no page, and so no script, without credentials
        admin = httpx.get(url, auth=("admin", "a-long-test-password-1"), timeout=10.0)
        _a_person_signs_in_and_lands_in_the_model_training_view(url)
    finally:
        stop_tree([server.popen.pid])
    assert stranger.status_code == 401 and mlflow_ui_app.DEFAULT_VIEW_SCRIPT not in stranger.text
    assert admin.status_code == 200 and admin.text.count(mlflow_ui_app.DEFAULT_VIEW_SCRIPT) == 1
    assert admin.text.index(mlflow_ui_app.DEFAULT_VIEW_SCRIPT) < admin.text.index(
        "static-files/static/js/main"
    )


def _a_person_signs_in_and_lands_in_the_model_training_view(url: str) -> None:
    """Headless Chromium answering the server's basic-auth prompt, as a person's browser does."""
    from playwright.sync_api import expect, sync_playwright

    from tests.integration.test_ui import CHROMIUM, CHROMIUM_ARGS, WAIT_MS

    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (`apt-get install chromium`, or `make system-deps` as root)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(
                http_credentials={"username": "admin", "password": "a-long-test-password-1"}
            )
            page = context.new_page()
            page.goto(url)
            # The home page's sidebar offers the registry in the model-training view only (not in GenAI's).
            expect(page.get_by_role("link", name="Model registry")).to_be_visible(timeout=WAIT_MS)
            assert (
                page.evaluate(f"localStorage.getItem('{mlflow_ui_app.STORED_CHOICE_KEY}')")
                == '"machine_learning"'
            )
        finally:
            browser.close()
