"""`distrl up` held for a long learning run, with "Custom run" submits of `retrain` from the Prefect UI.

    nice -n 10 .venv/bin/python -m bench.up_soak --database auto --minutes 30 --submits 5

starts the stack as `distrl up` does (`--database`: auto, sqlite or postgres), submits the learning
run of docs/operations.md (`learn`, both collectors) lasting `--minutes`, and at evenly spread times
opens the `retrain` deployment in headless Chromium (Debian's, driven by Playwright, as
tests/integration/test_ui.py does) and submits the "Custom run" form with its defaults, as a person
would; each submit counts only if the Prefect API then holds one more `retrain` flow run. When the
window ends it counts `database is locked`, ERROR and traceback lines in every log of the stack and
samples of the load average, and writes them under the database's key of bench/results/up_soak.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench._common import RESULTS, machine
from ops.up import Stack, UpConfig

REPO = Path(__file__).resolve().parents[1]
OUT = RESULTS / "up_soak.json"
LOCKED = "database is locked"
UI_ERRORS = ("Oops. Something went wrong.", "Something went wrong")
SUBMIT_WAIT_S = 120.0  # a submit counts if its flow run appears within this
WAIT_MS = 90_000  # the UI's pages render after their API calls, slow on a busy machine
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
]
CHROMIUM_ARGS += ["--disable-component-update", "--disable-sync", "--no-first-run"]


def count_log_lines(logs: Path) -> dict[str, dict[str, int]]:
    """Per log file: lines saying `database is locked`, ERROR lines and traceback starts."""
    counts: dict[str, dict[str, int]] = {}
    for path in sorted(logs.rglob("*.log")):
        text = path.read_text(errors="replace").splitlines()
        counts[str(path.relative_to(logs))] = {
            "database_is_locked": sum(LOCKED in line for line in text),
            "error": sum(bool(re.search(r"\bERROR\b", line)) for line in text),
            "traceback": sum(line.startswith("Traceback (most recent call last)") for line in text),
        }
    return counts


def _learning_run(stack: Stack, minutes: float) -> list[str]:
    """The recipe's runs (learn, both collectors), lasting `minutes`."""
    collectors = {"collect/collect-pool-a": ("a", 1), "collect/collect-pool-b": ("b", 2)}
    runs: dict[str, dict[str, object]] = {"learn/learn": {"max_minutes": minutes}}
    for name, (pool, seed) in collectors.items():
        runs[name] = {"pool": f"pool_{pool}", "collector_id": f"{pool}0", "seed": seed, "family": "general"}
        runs[name]["max_minutes"] = minutes + 0.5
    ids = []
    with stack.api() as client:
        for name, params in runs.items():
            deployment = client.read_deployment_by_name(name)
            ids.append(
                str(client.create_flow_run_from_deployment(deployment.id, parameters={"params": params}).id)
            )
    return ids


def _retrain_runs(stack: Stack) -> tuple[str, set[str]]:
    """The deployment's id and its flow runs that a person started (not its schedule's)."""
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    with stack.api() as client:
        deployment = client.read_deployment_by_name("retrain/retrain")
        only = DeploymentFilter(id=DeploymentFilterId(any_=[deployment.id]))
        runs = client.read_flow_runs(deployment_filter=only)
    return str(deployment.id), {str(run.id) for run in runs if not run.auto_scheduled}


def submit_custom_run(stack: Stack, browser: Any, shots: Path | None = None) -> dict[str, Any]:
    """The deployment page, "Run" > "Custom run", the form's "Submit", as a person clicks them."""
    deployment_id, before = _retrain_runs(stack)
    started = time.monotonic()
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    result: dict[str, Any] = {"at_utc": time.strftime("%H:%M:%SZ", time.gmtime()), "created": False}
    failed: list[str] = []  # the page's failed API calls and console errors, to tell why a submit failed

    def on_response(response: Any) -> None:
        if response.status >= 400:
            failed.append(f"{response.status} {response.request.method} {response.url}")

    def on_console(message: Any) -> None:
        if message.type == "error":
            failed.append(f"console: {message.text[:300]}")

    page.on("response", on_response)
    page.on("console", on_console)
    try:
        page.goto(f"{stack.url('prefect')}/deployments/deployment/{deployment_id}", timeout=WAIT_MS)
        page.get_by_role("button", name=re.compile(r"^\s*Run\s*$")).first.click(timeout=WAIT_MS)
        page.get_by_text("Custom run", exact=True).first.click(timeout=WAIT_MS)
        page.get_by_role("button", name=re.compile(r"^\s*Submit\s*$")).first.click(timeout=WAIT_MS)
        deadline = time.monotonic() + SUBMIT_WAIT_S
        while time.monotonic() < deadline:
            if _retrain_runs(stack)[1] - before:
                result["created"] = True
                break
            time.sleep(1)
        body = page.inner_text("body")
        result["ui_errors"] = [text for text in UI_ERRORS if text in body]
        if not result["created"] and shots is not None:
            page.screenshot(path=shots / f"submit-{result['at_utc'].replace(':', '')}.png", full_page=True)
    except Exception as exc:  # a button that never appears is a failed submit, not a crashed bench
        result["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    finally:
        page.close()
    result["failed_requests"] = failed[:20]
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def _wait_until(moment: float, sample: Callable[[], None]) -> None:
    while time.monotonic() < moment:
        sample()
        time.sleep(min(30.0, max(0.0, moment - time.monotonic())))


def soak(database: str, minutes: float, submits: int, run_dir: Path) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("Chromium is not installed (`apt-get install chromium`)")
    loads: list[list[float]] = []
    stack = Stack(UpConfig(run_dir=run_dir, project_dir=REPO, database=database))  # type: ignore[arg-type]
    result: dict[str, Any] = {"database_option": database, "minutes": minutes, "machine_start": machine()}
    with stack:
        result["stack_up_s"] = round(stack.timings["total_s"], 1)
        result["database"] = "postgres" if stack.database is not None else f"sqlite ({stack.database_note})"
        ready = time.monotonic()
        result["learning_runs"] = _learning_run(stack, minutes)
        window_end = ready + minutes * 60

        def sample() -> None:
            loads.append([round(x, 2) for x in os.getloadavg()])

        done: list[dict[str, Any]] = []
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            for i in range(submits):
                _wait_until(ready + minutes * 60 * (i + 0.5) / submits, sample)
                done.append(
                    submit_custom_run(stack, browser, stack.run_dir.parent)
                    | {"minute": round((time.monotonic() - ready) / 60, 1)}
                )
                print(json.dumps(done[-1]), flush=True)
            browser.close()
        _wait_until(window_end, sample)
        result["window_s"] = round(time.monotonic() - ready, 1)
        result["submits"] = done
        result["retrain_runs_started_by_hand"] = len(_retrain_runs(stack)[1])
        result["versions_published"] = _versions(stack)
        result["logs"] = count_log_lines(stack.run_dir / "logs")
    totals = {
        key: sum(c[key] for c in result["logs"].values())
        for key in ("database_is_locked", "error", "traceback")
    }
    result["totals"] = totals | {"submits_created": sum(bool(s["created"]) for s in done), "submits": submits}
    result["loadavg_1min"] = {
        "min": min(x[0] for x in loads),
        "max": max(x[0] for x in loads),
        "samples": len(loads),
    }
    result["loadavg_samples"] = loads
    return result


def _versions(stack: Stack) -> int:
    from mlflow import MlflowClient

    from storage.registry import RegistrySettings

    name = RegistrySettings().model_name
    client = MlflowClient(tracking_uri=stack.url("mlflow"))
    return len(client.search_model_versions(f"name='{name}'"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", choices=("auto", "sqlite", "postgres"), default="auto")
    parser.add_argument(
        "--minutes", type=float, default=30.0, help="the learning run's length and the window"
    )
    parser.add_argument(
        "--submits", type=int, default=5, help="Custom-run submits of retrain, spread over it"
    )
    parser.add_argument(
        "--dir", type=Path, default=None, help="the stack's folder (default: a temporary one)"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    run_dir = args.dir or Path(tempfile.mkdtemp(prefix="up-soak-")) / "up"
    result = soak(args.database, args.minutes, args.submits, run_dir)
    print(json.dumps(result["totals"] | {"stack_up_s": result["stack_up_s"], "window_s": result["window_s"]}))
    stored = json.loads(args.out.read_text()) if args.out.exists() else {}
    stored[result["database"].split()[0]] = result
    args.out.write_text(json.dumps(stored, indent=1) + "\n")


if __name__ == "__main__":
    main()
