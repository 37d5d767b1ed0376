"""Settings of the embedded (single-machine) mode: one folder holds the store, MLflow and Prefect.

Must run before Prefect or MLflow are imported: both read their settings from the environment.
Variables the user already set win, so the same commands point at S3 or a server when asked.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any


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
    _tie_prefect_server_to_this_process()
    return root


class _ServerSubprocess:
    """The `subprocess` module as Prefect's server module sees it: its ephemeral API server starts in
    a session of its own (a signal to our process group, from `timeout` or Ctrl-C, reaches us, and
    we stop in order while the server still answers) and dies with this process, even on kill -9."""

    def __getattr__(self, name: str) -> object:
        return getattr(subprocess, name)

    @staticmethod
    def Popen(*args: Any, **kwargs: Any) -> subprocess.Popen:
        from flows.processes import die_with_parent

        kwargs.setdefault("start_new_session", True)
        kwargs.setdefault("preexec_fn", die_with_parent)
        return subprocess.Popen(*args, **kwargs)


def _tie_prefect_server_to_this_process() -> None:
    if os.name != "posix":
        return
    import prefect.server.api.server as server_module

    server_module.subprocess = _ServerSubprocess()  # type: ignore[assignment]
