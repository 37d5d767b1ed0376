"""What `distrl up`'s children start with: each one's environment and each server's command line.

Each child gets, from this process's environment, only the variables its role needs (the
allowlists below, the one place that says which), plus what the stack passes explicitly: its
addresses, moto's dummy S3 keys to the children that use S3 (the clients and the MLflow server,
whose artifact store is the bucket), the judge's key to the workers only, and `UpConfig.worker_env`.
A name nobody listed (HF_TOKEN, GITHUB_TOKEN, MLFLOW_TRACKING_PASSWORD, PREFECT_API_KEY, a user's
AWS keys or profile...) reaches no child, nor does a listed variable whose value holds a URL with a
password (`https://user:pw@host`). No AWS credentials file or profile either. A database URL in
an argv holds no password: the servers get it as PGPASSWORD (argv and state.json are readable).

- every role: the system's (PATH, HOME, user, locale, time zone, temp folders, TLS trust, the
  dynamic linker's path) and the Python interpreter's own variables;
- workers, which run the flows: also the compute settings (threads, GPUs, model caches, Android
  SDK) and every documented, non-secret DISTRL_* setting (docs/operations.md's table:
  `ops.config_table.variables`), so a machine's DISTRL_REPLAY_* and the like reach its flow runs.
Nothing PREFECT_* or MLFLOW_* is inherited: the stack sets what its servers and clients use.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ops import postgres
from ops.embedded import CLIENT_MAX_RETRIES

if TYPE_CHECKING:
    from ops.up import Stack

HOST = "127.0.0.1"
# One SQLite-backed server for every role: under bursts of task runs it answers 503 for a while;
# every client (workers, flow runs, `Stack.api`) retries 503 with exponential backoff (2, 4, ... 256 s),
# as the embedded server's clients do (ops.embedded.CLIENT_MAX_RETRIES).
DUMMY_S3_KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
JUDGE_KEYS = ("DISTRL_JUDGE_API_KEY", "OPENAI_API_KEY")

SYSTEM_VARIABLES = frozenset(
    {
        *("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "NO_COLOR"),
        *("TMPDIR", "TEMP", "TMP", "LD_LIBRARY_PATH", "VIRTUAL_ENV"),
        *("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"),
        *("PYTHONPATH", "PYTHONHOME", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONWARNINGS"),
        *("PYTHONHASHSEED", "PYTHONUTF8", "PYTHONIOENCODING", "PYTHONFAULTHANDLER", "PYTHONNOUSERSITE"),
        *("PYTHONPYCACHEPREFIX", "PYTHONSAFEPATH", "PYTHONDEVMODE", "PYTHONOPTIMIZE"),
    }
)
SYSTEM_PREFIXES = ("LC_",)  # the locale's categories
COMPUTE_VARIABLES = frozenset(
    {
        *("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TOKENIZERS_PARALLELISM"),
        *("CUDA_VISIBLE_DEVICES", "CUDA_HOME", "PYTORCH_CUDA_ALLOC_CONF", "TORCH_HOME", "XDG_CACHE_HOME"),
        *("HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_CACHE", "TRANSFORMERS_OFFLINE"),
        *("ANDROID_HOME", "ANDROID_SDK_ROOT", "ANDROID_ADB_SERVER_PORT"),
    }
)
COMPUTE_PREFIXES = ("NVIDIA_",)
# DISTRL_* variables that are documented but secret: passed explicitly (the judge's key) or never
# (the learner-rank key: on one host rank 0 draws its own).
SECRET_SETTINGS = frozenset({"DISTRL_JUDGE_API_KEY", "DISTRL_POSTGRES_URL", "DISTRL_LEARNER_RANK_KEY"})
ROLES = ("s3", "mlflow", "prefect", "deploy", "worker")
# scheme://user:password@ — a listed variable holding one is left out whole.
_URL_PASSWORD = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^/@\s:]*:[^/@\s]*@")


def allowed(role: str, name: str) -> bool:
    """Whether a child of `role` (`ROLES`) may take `name` from this process's environment."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; one of {ROLES}")
    if name in SYSTEM_VARIABLES or name.startswith(SYSTEM_PREFIXES):
        return True
    if role != "worker":
        return False
    return name in COMPUTE_VARIABLES or name.startswith(COMPUTE_PREFIXES) or name in _worker_settings()


@functools.cache
def _worker_settings() -> frozenset[str]:
    from ops.config_table import variables  # the documented settings

    return frozenset(variables() - SECRET_SETTINGS)


def inherited(role: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The part of `environ` (default: this process's) that a child of `role` starts with."""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in environ.items() if allowed(role, k) and not _URL_PASSWORD.search(v)}


def child_env(
    stack: Stack,
    role: str,
    *,
    s3_keys: bool | None = None,
    judge: bool = False,
    **extra: str,
) -> dict[str, str]:
    """The allowlist of `role`, then the stack's settings: moto's keys if `s3_keys` (default: the
    clients, not the servers), the judge's if `judge`, then `extra`."""
    server = role in ("s3", "mlflow", "prefect")
    base = {
        "PREFECT_HOME": str(stack.run_dir / "prefect"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "PYTHONUNBUFFERED": "1",
        "PREFECT_CLIENT_MAX_RETRIES": str(CLIENT_MAX_RETRIES),
        # No credentials file or profile either: botocore would read the user's own keys from it.
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_CONFIG_FILE": os.devnull,
    }
    ours = {"AWS_DEFAULT_REGION": "us-east-1"} if server else stack.client_env()
    ours = {k: v for k, v in ours.items() if k not in DUMMY_S3_KEYS}
    if (not server) if s3_keys is None else s3_keys:
        ours |= DUMMY_S3_KEYS
    keys = {k: os.environ[k] for k in JUDGE_KEYS if judge and os.environ.get(k)}
    return inherited(role) | base | ours | keys | extra


def server_env(stack: Stack, name: str) -> dict[str, str]:
    """The environment of server `name` ("s3", "mlflow" or "prefect")."""
    env = child_env(
        stack,
        name,
        s3_keys=name == "mlflow",  # its artifact store is the bucket; moto and Prefect need no keys
        MLFLOW_S3_ENDPOINT_URL=stack.url("s3"),
        MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false",  # else ~10 job processes (1.7 GB)
        PREFECT_SERVER_LOGGING_LEVEL="WARNING",
        # SQLite locks while workers heartbeat and runs start; on a busy machine the default 10 s
        # wait for the lock runs out and the API answers 503.
        PREFECT_SERVER_DATABASE_TIMEOUT="60",
    )
    if stack.database is not None and name != "s3":
        env |= stack.database.env()
        if name == "prefect":
            env["PREFECT_SERVER_DATABASE_CONNECTION_URL"] = stack.database.url(postgres.PREFECT_DB, "asyncpg")
    if name == "prefect":
        # The UI is a static page that asks `/ui-settings` where the API is: without this it says
        # the default port (4200), not the free port this server got, and every page fails.
        env["PREFECT_SERVER_UI_API_URL"] = stack.prefect_api_url
    return env


def server_argv(stack: Stack, name: str, port: int) -> list[str]:
    """The command line of server `name` on `port`."""
    py = sys.executable
    if name == "s3":
        return [py, "-m", "moto.server", "-H", HOST, "-p", str(port)]
    if name == "mlflow":
        from tasks import mlflow_ui_app

        mlflow_ui_app.require_registered()  # its UI opens in the model-training view (tasks/mlflow_ui_app.py)
        db = (
            stack.database.url(postgres.MLFLOW_DB)
            if stack.database
            else f"sqlite:///{stack.run_dir / 'mlflow.db'}"
        )
        return [
            *(py, "-m", "mlflow", "server", "--app-name", mlflow_ui_app.APP_NAME),
            *("--host", HOST, "--port", str(port), "--workers", "1"),
            *("--backend-store-uri", db),
            *("--artifacts-destination", f"s3://{stack.config.bucket}/mlflow"),
        ]
    ui = "--ui" if stack.config.ui else "--no-ui"
    return [py, "-m", "prefect", "server", "start", "--host", HOST, "--port", str(port), ui]
