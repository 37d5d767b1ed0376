"""The two web UIs of `distrl up`, opened in a real headless Chromium (Debian's `chromium` package,
driven by Playwright): the Prefect UI lists the deployments with online work pools, the MLflow UI
lists the registered policy's versions. `make test` installs Chromium when it runs as root."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from flows.up import Stack, UpConfig, read_deployments, work_pools
from tests.integration.conftest import REPO, client_env

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.timeout(420)]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Offline and quiet: no update checks, crash reports or first-run pages (nothing may download).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
NO_API = "Can't connect to Server API"
WAIT_MS = 60_000  # the UIs are single-page apps: they render after their API calls, slow on a busy machine


@pytest.fixture(scope="module")
def ui_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (`apt-get install chromium`, or `make system-deps` as root)")
    pytest.importorskip("playwright", reason="playwright is a dev extra: pip install -e '.[dev]'")
    config = UpConfig(run_dir=tmp_path_factory.mktemp("up-ui"), project_dir=REPO, worker_query_seconds=2)
    with Stack(config) as started:
        yield started


@pytest.fixture(scope="module")
def browser(ui_stack: Stack) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def _publish_two_versions(stack: Stack) -> str:
    """Two versions of an untrained policy, published as the learner does."""
    from distrl_core.policy import save_policy
    from distrl_core.policy.config import PolicyConfig
    from distrl_core.policy.model import Policy
    from storage.registry import PolicyRegistry

    with client_env(stack), tempfile.TemporaryDirectory() as tmp:
        registry = PolicyRegistry()
        run_id = registry.start_run("ui-test")
        path = save_policy(Policy.create(PolicyConfig()), Path(tmp) / "policy")
        for _ in range(2):
            registry.publish(path, run_id=run_id)
        return registry.name


def test_prefect_ui_shows_deployments_and_online_work_pools(ui_stack: Stack, browser) -> None:
    deployments = [d["name"] for d in read_deployments(REPO)]
    from playwright.sync_api import expect

    page = browser.new_page()
    page.goto(ui_stack.url("prefect") + "/deployments")
    # The page shows the deployments once its API calls succeed, or the UI's own connection error.
    first = page.get_by_text(deployments[0], exact=True).or_(page.get_by_text(NO_API))
    first.first.wait_for(timeout=WAIT_MS)
    body = page.inner_text("body")
    settings = httpx.get(ui_stack.url("prefect") + "/ui-settings").json()
    assert NO_API not in body, f"the UI looks for its API at {settings['api_url']}:\n{body[:500]}"
    for deployment in deployments:
        page.get_by_text(deployment, exact=True).first.wait_for(timeout=WAIT_MS)
    # A deployment is 'Ready' only while a worker of its work pool polls: every pool is online.
    expect(page.get_by_text("Ready", exact=True)).to_have_count(len(deployments), timeout=WAIT_MS)

    page.goto(ui_stack.url("prefect") + "/work-pools")
    for pool in work_pools(REPO):
        page.get_by_text(pool, exact=True).first.wait_for(timeout=WAIT_MS)
    # The workers' last polls arrive after the pools (another API call).
    expect(page.get_by_text("Last Polled")).to_have_count(len(work_pools(REPO)), timeout=WAIT_MS)
    assert settings["api_url"] == ui_stack.prefect_api_url
    page.close()


def test_mlflow_ui_shows_the_registered_model_versions(ui_stack: Stack, browser) -> None:
    name = _publish_two_versions(ui_stack)
    page = browser.new_page()
    page.goto(f"{ui_stack.url('mlflow')}/#/models/{name}")
    page.get_by_text("Version 2", exact=True).first.wait_for(timeout=WAIT_MS)
    assert "Version 1" in page.inner_text("body")
    page.close()
