"""Child processes of `distrl up` and of the integration test: started in their own process group,
logged to a file, stopped with everything they spawned.

Prefect's process worker starts each flow run in a new session, so killing a worker's process
group would leave its flow runs behind: `stop_tree` collects every descendant first.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil

from flows.child_process import die_with_parent

# The user's credentials: left out of every child's environment (the caller adds back those a child uses).
CREDENTIALS = frozenset(
    {
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_ROLE_ARN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "DISTRL_JUDGE_API_KEY",
        "OPENAI_API_KEY",
        "PGPASSWORD",
        "DISTRL_POSTGRES_URL",
    }
)


def without_credentials(environ: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in environ.items() if k.upper() not in CREDENTIALS}


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (bind to 0); a server that loses the race is restarted."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass
class Managed:
    """One started child: its name (for messages), argv, log file and Popen handle."""

    name: str
    argv: list[str]
    log_path: Path
    popen: subprocess.Popen

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


def start(
    name: str,
    argv: Sequence[str],
    *,
    env: dict[str, str],
    log_path: Path,
    cwd: Path | None = None,
    user: str | None = None,
    outlive_parent: bool = False,
) -> Managed:
    """`user`: run as that user (and its group only), e.g. PostgreSQL's server, which refuses root.
    `outlive_parent`: keep running when this process exits (a detached stack, stopped by
    `distrl up --down`); otherwise the child dies with it (`die_with_parent`)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # Private, as env.sh: a server may log what it was sent (a request's headers, a worker's settings).
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)  # a log left by an earlier run keeps its mode otherwise
    with open(fd, "ab") as log:
        popen = subprocess.Popen(
            list(argv),
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in the terminal reaches us only; we stop children in order
            # Runs after the switch of user: the setting survives it.
            preexec_fn=None if outlive_parent else die_with_parent,
            **as_user(user),
        )
    return Managed(name, list(argv), log_path, popen)


def as_user(user: str | None) -> dict[str, Any]:
    """Popen's arguments that run a child as `user`, with that user's primary group and no other."""
    if user is None:
        return {}
    entry = pwd.getpwnam(user)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def wait_until(
    check: Callable[[], bool], *, what: str, timeout_s: float, proc: Managed | None = None
) -> float:
    """Poll `check` until it holds; fail early, with the log's tail, if `proc` exits meanwhile."""
    started = time.monotonic()
    while True:
        with contextlib.suppress(Exception):
            if check():
                return time.monotonic() - started
        if proc is not None and not proc.alive():
            raise ProcessExited(proc)
        if time.monotonic() - started > timeout_s:
            where = f"; its log ({proc.log_path}) ends with:\n{proc.tail()}" if proc else ""
            raise TimeoutError(f"{what} not ready after {timeout_s:.0f} s{where}")
        time.sleep(0.3)


def http_ok(url: str) -> Callable[[], bool]:
    def check() -> bool:
        return httpx.get(url, timeout=2.0).status_code == 200

    return check


class ProcessExited(RuntimeError):
    def __init__(self, proc: Managed) -> None:
        self.proc = proc
        super().__init__(
            f"{proc.name} exited with code {proc.popen.returncode}; its log ({proc.log_path}) ends with:\n"
            f"{proc.tail()}"
        )

    @property
    def port_taken(self) -> bool:
        text = self.proc.tail(80).lower()
        return "address already in use" in text or "errno 98" in text


def stop_tree(pids: Sequence[int], *, grace_s: float = 10.0) -> None:
    """SIGTERM processes, their groups and every descendant; SIGKILL whatever outlives `grace_s`."""
    family: list[psutil.Process] = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            root = psutil.Process(pid)
            family += [root, *root.children(recursive=True)]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)  # group members that a descendant walk could miss
    for proc in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.terminate()
    _, alive = psutil.wait_procs(family, timeout=grace_s)
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(alive, timeout=5)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def same_process(pid: int, argv: Sequence[str]) -> bool:
    """Whether `pid` still runs `argv` (a recorded pid may have been reused by something else)."""
    try:
        return psutil.Process(pid).cmdline() == list(argv)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def stop_recorded(path: Path, *, dry_run: bool = False) -> list[str]:
    """Stop the processes a state file (`{"processes": [{name, pid, argv}]}`) lists and that still run
    the same command; returns their names. The file is then left listing none."""
    if not path.exists():
        return []
    entries = json.loads(path.read_text())["processes"]
    alive = [e for e in entries if same_process(e["pid"], e["argv"])]
    if not dry_run:
        stop_tree([e["pid"] for e in alive])
        path.write_text(json.dumps({"processes": []}))
    return [e["name"] for e in alive]
