"""The two web UIs of `distrl up`, opened in a real headless Chromium (Debian's `chromium` package,
driven by Playwright): the Prefect UI lists the deployments with online work pools, the MLflow UI
lists the registered policy's versions, and the MLflow URLs the project prints open on the runs
table with metric columns. `make test` installs Chromium when it runs as root."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ops.up import Stack, UpConfig, read_deployments, work_pools
from tests.integration.conftest import REPO, client_env
from tests.prefect_services import forget_prefect_workers

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
    # No continuous evaluator: it would score the versions these tests publish (66 episodes each) and
    # make one champion, which the curve test's 4-episode reports could not be paired with.
    config = UpConfig(
        run_dir=tmp_path_factory.mktemp("up-ui"), project_dir=REPO, worker_query_seconds=2, evaluator=False
    )
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


# The GenAI side of MLflow 3's UI, which a training experiment must not open on.
GENAI_ONLY = ("Observability", "Detect Issues", "Judges")


def _tracked_runs(stack: Stack) -> str:
    """A learner's and a collector's runs with metrics, started as the flows start theirs; the
    learner run's URL as its log line gives it."""
    from storage.registry import PolicyRegistry
    from tasks.mlflow_metrics import log_metrics, run_url, start_tracked_run

    with client_env(stack):
        registry = PolicyRegistry()
        learner = start_tracked_run(registry, "learner", tags={"role": "learner"}, params={"batch_size": 4})
        log_metrics(registry, learner, {"actor_loss": 0.25, "entropy": 1.5, "replay_steps": 640}, step=8)
        collector = start_tracked_run(registry, "collector-pool_a-a0", tags={"role": "collector"}, params={})
        log_metrics(registry, collector, {"rolling_success": 0.375}, step=64)
        return run_url(registry, learner)


def test_the_mlflow_urls_printed_open_the_runs_table_with_metric_columns(ui_stack: Stack, browser) -> None:
    from playwright.sync_api import expect

    learner_url = _tracked_runs(ui_stack)
    printed = re.search(r"MLflow UI\s+(\S+)", ui_stack.describe())
    assert printed, ui_stack.describe()

    page = browser.new_page(viewport={"width": 1600, "height": 1000})  # a fresh profile: a first visit
    page.goto(printed.group(1))
    page.get_by_text("collector-pool_a-a0", exact=True).first.wait_for(timeout=WAIT_MS)
    for column in ("actor_loss", "entropy", "rolling_success", "replay_steps"):
        expect(page.get_by_text(column, exact=True).first).to_be_visible(timeout=WAIT_MS)
    for value in ("0.25", "0.375", "640"):  # the runs' values in those columns
        expect(page.get_by_text(value, exact=True).first).to_be_visible(timeout=WAIT_MS)
    body = page.inner_text("body")
    assert not [text for text in GENAI_ONLY if text in body], body[:1500]
    page.close()

    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(learner_url)
    expect(page.get_by_text("actor_loss", exact=True).first).to_be_visible(timeout=WAIT_MS)
    body = page.inner_text("body")
    assert "learner" in body and "Runs" in body
    assert not [text for text in GENAI_ONLY if text in body], body[:1500]
    page.close()


def test_the_heldout_curve_artifact_reads_whole_and_links_mlflow(ui_stack: Stack, browser) -> None:
    """The table artifact's description as Prefect renders it: not cut at a would-be HTML tag, with
    the MLflow curve run as a link that opens in the model-training view."""
    from playwright.sync_api import expect

    from tests.flows.test_evaluation_records import _record, _report

    with client_env(ui_stack):
        from storage.registry import PolicyRegistry

        registry = PolicyRegistry()
        learner = registry.start_run("learner", tags={"role": "learner"})
        with tempfile.TemporaryDirectory() as tmp:
            from distrl_core.policy import save_policy
            from distrl_core.policy.config import PolicyConfig
            from distrl_core.policy.model import Policy

            path = save_policy(Policy.create(PolicyConfig()), Path(tmp) / "policy")
            version = registry.publish(path, run_id=learner)
        from prefect.settings import PREFECT_API_URL, temporary_settings

        forget_prefect_workers()
        with temporary_settings({PREFECT_API_URL: ui_stack.prefect_api_url}):
            _record([_report(version, "0110")], training_run=learner)
        forget_prefect_workers()

    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(ui_stack.url("prefect") + "/artifacts/key/heldout-learning-curve")
    link = page.get_by_role("link", name=re.compile(r"held-out curve of learner"))
    expect(link.first).to_be_visible(timeout=WAIT_MS)
    assert "(the MLflow run 'held-out curve of '" not in page.inner_text("body")
    href = link.first.get_attribute("href") or ""
    assert href.startswith(ui_stack.url("mlflow")) and "workflowType=machine_learning" in href
    page.close()


def test_mlflow_pages_reached_by_clicking_stay_in_the_model_training_view(ui_stack: Stack, browser) -> None:
    """A first visit as a person makes it: the printed runs table, a click on a run's name (MLflow's
    link drops `workflowType`), the sidebar's Model registry, the policy, a version. Every page stays in
    the model-training view (its sidebar: Runs, Models, Model registry), none in the GenAI one (runs
    titled "Evaluations", no registry); the sidebar's GenAI switch still works and is kept."""
    from playwright.sync_api import expect

    from storage.registry import PolicyRegistry
    from tasks.mlflow_metrics import start_tracked_run

    with client_env(ui_stack), tempfile.TemporaryDirectory() as tmp:
        from distrl_core.policy import save_policy
        from distrl_core.policy.config import PolicyConfig
        from distrl_core.policy.model import Policy

        registry = PolicyRegistry()
        run = start_tracked_run(registry, "learner-clicked", tags={"role": "learner"}, params={})
        version = registry.publish(
            save_policy(Policy.create(PolicyConfig()), Path(tmp) / "policy"), run_id=run
        )
        model = registry.name

    page = browser.new_page(viewport={"width": 1600, "height": 1000})  # a fresh profile: nothing stored
    page.goto(ui_stack.mlflow_runs_url, timeout=WAIT_MS)
    page.get_by_text("learner-clicked", exact=True).first.click(timeout=WAIT_MS)
    page.wait_for_url(re.compile(rf"/runs/{run}"), timeout=WAIT_MS)
    assert "workflowType" not in page.url  # MLflow's own link: the view comes from the browser's choice
    registry_link = page.get_by_role("link", name="Model registry")
    expect(registry_link.first).to_be_visible(timeout=WAIT_MS)
    _assert_model_training_view(page)

    registry_link.first.click()
    # A first visit of the registry opens MLflow's "new Model Registry UI" notice: closed as a person does.
    notice = page.get_by_role("dialog")
    notice.first.wait_for(timeout=WAIT_MS)
    page.keyboard.press("Escape")
    expect(notice).to_have_count(0, timeout=WAIT_MS)
    page.get_by_text(model, exact=True).first.click(timeout=WAIT_MS)
    page.get_by_text(f"Version {version}", exact=True).first.click(timeout=WAIT_MS)
    page.wait_for_url(re.compile(rf"/models/{model}/versions/{version}"), timeout=WAIT_MS)
    expect(page.get_by_text("Source Run").first).to_be_visible(timeout=WAIT_MS)
    _assert_model_training_view(page)

    # Choosing the GenAI view stays a person's choice: kept on the next page load (no registry there).
    page.get_by_text("GenAI", exact=True).first.click()
    page.reload()
    expect(page.get_by_text("Source Run").first).to_be_visible(timeout=WAIT_MS)
    expect(registry_link).to_have_count(0, timeout=WAIT_MS)
    assert page.evaluate("localStorage.getItem('mlflow.workflowType_v1')") == '"genai"'
    page.close()


def _assert_model_training_view(page) -> None:
    from playwright.sync_api import expect

    for item in ("Runs", "Models", "Model registry"):  # the model-training sidebar of the experiment
        expect(page.get_by_text(item, exact=True).first).to_be_visible(timeout=WAIT_MS)
    body = page.inner_text("body")
    assert "Evaluations" not in body and not [t for t in GENAI_ONLY if t in body], body[:1500]
