"""What `distrl up` starts (`UpConfig`), the deployments it reads from prefect.yaml, and the learning
run it suggests (`recipe`, which docs/operations.md shows: tests/test_docs.py keeps them equal)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, Field

# The learning run that `distrl up` suggests and docs/operations.md shows (tests/test_docs.py checks
# they agree), measured in docs/performance.md: the collectors outlast the learner a little, so
# its last blocks still get fresh episodes, and then stop instead of running until cancelled.
LEARN_MINUTES = 6
COLLECT_MINUTES = 6.5


def recipe() -> list[str]:
    """The commands of that run, once `env.sh` is sourced."""
    # `--param params=...` replaces the deployment's whole `params`: a collector's are restated.
    collectors = {
        f"collect-pool-{p}": {"pool": f"pool_{p}", "collector_id": f"{p}0", "seed": seed, "family": "general"}
        for p, seed in (("a", 1), ("b", 2))
    }
    return [
        f"prefect deployment run learn/learn --param params='{json.dumps({'max_minutes': LEARN_MINUTES})}'",
        *(
            f"prefect deployment run collect/{name} --param params='"
            f"{json.dumps(params | {'max_minutes': COLLECT_MINUTES})}'"
            for name, params in collectors.items()
        ),
        "# the evaluator (already running) scores the warm start and each version as it is published;",
        "# `distrl status` prints the learner's held-out curve (minutes, env steps, version, success, CI)",
        'distrl sql "SELECT pool, policy_version, count(*) AS steps FROM steps GROUP BY ALL ORDER BY ALL"',
        "distrl status",
    ]


class UpConfig(BaseModel):
    """What `distrl up` starts and where it keeps its files."""

    run_dir: Path = Field(
        Path(".distrl/up"), description="Logs, databases, env.sh and state; wiped at start."
    )
    project_dir: Path = Field(
        Path("."), description="Checkout with prefect.yaml and flows/ (DISTRL_PROJECT_DIR of the workers)."
    )
    bucket: str = Field(
        "distrl",
        pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
        description="S3 bucket of the store and the MLflow artifacts.",
    )
    database: Literal["auto", "sqlite", "postgres"] = Field(
        "auto",
        description="Database of the Prefect and MLflow servers: PostgreSQL (a server of the stack's own, "
        "or DISTRL_POSTGRES_URL's), which has no `database is locked`, or SQLite files in the folder; "
        "`auto`: PostgreSQL when DISTRL_POSTGRES_URL is set or its programs are installed, else SQLite.",
    )
    ui: bool = Field(True, description="Serve the Prefect UI (the test turns it off: faster start).")
    deploy: bool = Field(True, description="Run `prefect deploy --all` from project_dir.")
    workers: bool = Field(True, description="Start one process worker per work pool of prefect.yaml.")
    worker_query_seconds: float = Field(
        5.0, gt=0, le=3600, description="How often workers poll for scheduled runs."
    )
    startup_timeout_s: float = Field(
        240.0, gt=0, le=86_400, description="Limit for each server, the deploy and workers."
    )
    worker_env: dict[str, str] = Field(
        default_factory=dict, description="Extra variables for every worker and its flow runs."
    )
    evaluator: bool = Field(
        True,
        description="Start a run of the `evaluator` deployment once the workers are up: every version the "
        "learner publishes is then scored on the held-out split without anyone asking.",
    )
    evaluator_params: dict[str, object] = Field(
        default_factory=dict,
        description="Overrides of the evaluator deployment's `params` (e.g. episodes_per_task).",
    )


def read_deployments(project_dir: Path) -> list[dict]:
    """The deployments of prefect.yaml (anchors resolved), as Prefect reads them."""
    path = Path(project_dir) / "prefect.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: run from the repository root or pass --project-dir")
    return yaml.safe_load(path.read_text())["deployments"]


def work_pools(project_dir: Path) -> list[str]:
    pools = [d["work_pool"]["name"] for d in read_deployments(project_dir)]
    return list(dict.fromkeys(pools))
