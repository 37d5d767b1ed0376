"""Settings of the embedded (single-machine) mode: one folder holds the store, MLflow and Prefect.

Must run before Prefect or MLflow are imported: both read their settings from the environment.
Variables the user already set win, so the same commands point at S3 or a server when asked.

Two commands started at once on a fresh home would both create Prefect's and MLflow's SQLite
tables (`table concurrency_limit_v2 already exists`, or alembic's `expected to match one row`):
the first start of a home (per Prefect and MLflow version) runs under an exclusive lock in it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

# Every Prefect client retries a 503 ("database is locked" on a loaded SQLite server) with backoff
# 2, 4, ... 2**N s, uncapped: 8 retries wait at most ~8.5 minutes in all. With 20 (as before) the
# 11th try alone sleeps ~34 minutes: a collector found sleeping in that retry loop held a finished
# 30-minute run open ~32 minutes past its budget (bench.time_to_target, 2026-12-04: 3,886 s).
CLIENT_MAX_RETRIES = 8

FIRST_START_LOCK = ".first-start.lock"
FIRST_START_DONE = ".first-start"  # + .prefect / .mlflow: the version that created it


def configure_embedded(
    root: str | Path = ".distrl", *, quiet: bool = False, prefect: bool = True, first_start: bool = True
) -> Path:
    """`prefect`: the command runs flows (its first start on a home also creates Prefect's database).
    `first_start=False`: settings only; no database is opened (the demo empties its home after the
    parser configured it, and MLflow keeps its engine per URI: one opened before would point at a
    deleted file)."""
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
        "PREFECT_CLIENT_MAX_RETRIES": str(CLIENT_MAX_RETRIES),
        "PREFECT_SERVER_DATABASE_TIMEOUT": "60",
        "PREFECT_SERVER_DATABASE_CONNECTION_TIMEOUT": "30",
    }
    if quiet:
        defaults["PREFECT_LOGGING_LEVEL"] = "WARNING"
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
    _tie_prefect_server_to_this_process()
    if first_start:
        _first_start(root, prefect=prefect)
    return root


def _first_start(root: Path, *, prefect: bool) -> None:
    """On a home not yet started by these versions: open MLflow's SQLite store and (`prefect`) start
    Prefect's temporary server, whose start migrates its database, one process at a time."""
    steps = {"mlflow": _open_mlflow} | ({"prefect": _start_prefect} if prefect else {})
    pending = [name for name in steps if _read(root / f"{FIRST_START_DONE}.{name}") != version(name)]
    if not pending:
        return
    with _exclusive(root / FIRST_START_LOCK):
        for name in pending:
            done = root / f"{FIRST_START_DONE}.{name}"
            if _read(done) != version(name):  # else another command did it while this one waited
                steps[name]()
                done.write_text(version(name))


def _start_prefect() -> None:
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_API_URL

    if not PREFECT_API_URL.value():  # else a server of the user's own: its database is not ours
        SubprocessASGIServer().start()  # the instance the command's client uses later


def _open_mlflow() -> None:
    uri = os.environ.get("DISTRL_MLFLOW_TRACKING_URI") or os.environ.get("MLFLOW_TRACKING_URI", "")
    if uri.startswith("sqlite:///"):  # a server creates its own tables
        from mlflow import MlflowClient

        MlflowClient(tracking_uri=uri, registry_uri=uri).search_registered_models(max_results=1)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """An exclusive `flock` on `path` (blocks while another process holds it); none off POSIX."""
    if os.name != "posix":
        yield
        return
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class _ServerSubprocess:
    """The `subprocess` module as Prefect's server module sees it: its ephemeral API server starts in
    a session of its own (a signal to our process group, from `timeout` or Ctrl-C, reaches us, and
    we stop in order while the server still answers) and dies with this process, even on kill -9."""

    def __getattr__(self, name: str) -> object:
        return getattr(subprocess, name)

    @staticmethod
    def Popen(*args: Any, **kwargs: Any) -> subprocess.Popen:
        from flows.child_process import die_with_parent

        kwargs.setdefault("start_new_session", True)
        kwargs.setdefault("preexec_fn", die_with_parent)
        return subprocess.Popen(*args, **kwargs)


def _tie_prefect_server_to_this_process() -> None:
    if os.name != "posix":
        return
    import prefect.server.api.server as server_module

    server_module.subprocess = _ServerSubprocess()  # type: ignore[assignment]
