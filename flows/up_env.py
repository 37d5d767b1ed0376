"""What `distrl up`'s children start with: each one's environment and each server's command line.

No child inherits a credential (`processes.without_credentials`, and no AWS credentials file or
profile either); moto's dummy S3 keys go to the children that use S3 (the clients and the MLflow
server, whose artifact store is the bucket), the judge's key to the workers only. A database URL
in an argv holds no password: the servers get it as PGPASSWORD (argv and state.json are readable).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from flows import postgres, processes

if TYPE_CHECKING:
    from flows.up import Stack

HOST = "127.0.0.1"
# One SQLite-backed server for every role: under bursts of task runs it answers 503 for a while;
# every client (workers, flow runs, `Stack.api`) retries 503 with exponential backoff (2, 4, ... 256 s).
CLIENT_MAX_RETRIES = 8
DUMMY_S3_KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
JUDGE_KEYS = ("DISTRL_JUDGE_API_KEY", "OPENAI_API_KEY")


def child_env(
    stack: Stack, *, server: bool = False, s3_keys: bool | None = None, judge: bool = False, **extra: str
) -> dict[str, str]:
    """No inherited credential; moto's keys if `s3_keys` (default: clients), the judge's if `judge`."""
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
    inherited = processes.without_credentials(os.environ)
    ours = {"AWS_DEFAULT_REGION": "us-east-1"} if server else stack.client_env()
    ours = {k: v for k, v in ours.items() if k not in DUMMY_S3_KEYS}
    if (not server) if s3_keys is None else s3_keys:
        ours |= DUMMY_S3_KEYS
    keys = {k: os.environ[k] for k in JUDGE_KEYS if judge and os.environ.get(k)}
    return inherited | base | ours | keys | extra


def server_env(stack: Stack, name: str) -> dict[str, str]:
    """The environment of server `name` ("s3", "mlflow" or "prefect")."""
    env = child_env(
        stack,
        server=True,
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
        db = (
            stack.database.url(postgres.MLFLOW_DB)
            if stack.database
            else f"sqlite:///{stack.run_dir / 'mlflow.db'}"
        )
        return [
            *(py, "-m", "mlflow", "server", "--host", HOST, "--port", str(port), "--workers", "1"),
            *("--backend-store-uri", db),
            *("--artifacts-destination", f"s3://{stack.config.bucket}/mlflow"),
        ]
    ui = "--ui" if stack.config.ui else "--no-ui"
    return [py, "-m", "prefect", "server", "start", "--host", HOST, "--port", str(port), ui]
