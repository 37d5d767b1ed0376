"""Settings of the embedded (single-machine) mode: one folder holds the store, MLflow and Prefect.

Must run before Prefect or MLflow are imported: both read their settings from the environment.
Variables the user already set win, so the same commands point at S3 or a server when asked.
"""

from __future__ import annotations

import os
from pathlib import Path


def configure_embedded(root: str | Path = ".distrl", *, quiet: bool = False) -> Path:
    root = Path(root).resolve()
    (root / "prefect").mkdir(parents=True, exist_ok=True)
    defaults = {
        "PREFECT_HOME": str(root / "prefect"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "DISTRL_STORE_URI": str(root / "store"),
        "DISTRL_MLFLOW_TRACKING_URI": f"sqlite:///{root / 'mlflow.db'}",
        "DISTRL_MLFLOW_CACHE_DIR": str(root / "policy-cache"),
        "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        # The ephemeral API is SQLite-backed: on a loaded 2-core machine it starts slowly and answers
        # 503 ("database is locked") under bursts of task runs; the client retries 503 with backoff.
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
        "PREFECT_CLIENT_MAX_RETRIES": "20",
        "PREFECT_SERVER_DATABASE_TIMEOUT": "60",
        "PREFECT_SERVER_DATABASE_CONNECTION_TIMEOUT": "30",
    }
    if quiet:
        defaults["PREFECT_LOGGING_LEVEL"] = "WARNING"
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
    return root
