"""`distrl up` children inherit by allowlist, per role (ops/up_env.py): HF_TOKEN, GITHUB_TOKEN,
MLFLOW_TRACKING_PASSWORD, PREFECT_API_KEY, PREFECT_API_AUTH_STRING, legacy AWS_ACCESS_KEY, a
password inside MLFLOW_TRACKING_URI and an unknown variable all reached moto, MLflow, the Prefect
server and every worker through a denylist. Now none reaches any child's /proc/<pid>/environ, and
the stack still deploys, its workers report and a worker runs a flow."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

from bench.faults_lease import CANARIES, CANARY_PARTS
from ops import up_env
from ops.up import Stack, UpConfig

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def canaries(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)


def test_each_role_inherits_only_its_allowlist() -> None:
    environ = CANARIES | {
        "PATH": "/usr/bin",
        "HOME": "/home/x",
        "LC_ALL": "C.UTF-8",
        "PYTHONPATH": "/src",
        "OMP_NUM_THREADS": "1",
        "DISTRL_REPLAY_CAPACITY_STEPS": "5000",
        "DISTRL_LEASE_TTL_S": "30",
        "DISTRL_JUDGE_API_KEY": "sk-judge-passed-explicitly-only",
        "DISTRL_POSTGRES_URL": "postgresql://u:pw@h/db",
    }
    for role in up_env.ROLES:
        got = up_env.inherited(role, environ)
        assert {"PATH", "HOME", "LC_ALL", "PYTHONPATH"} <= set(got), role
        assert not set(got) & set(CANARIES), (role, sorted(set(got) & set(CANARIES)))
        assert "DISTRL_JUDGE_API_KEY" not in got and "DISTRL_POSTGRES_URL" not in got, role
        settings = {"OMP_NUM_THREADS", "DISTRL_REPLAY_CAPACITY_STEPS", "DISTRL_LEASE_TTL_S"}
        assert (settings <= set(got)) == (role == "worker") and (settings & set(got)) <= settings, role
    with pytest.raises(ValueError, match="unknown role"):
        up_env.inherited("collector", environ)


def _family(stack: Stack) -> list[psutil.Process]:
    found = []
    for proc in stack.procs.values():
        try:
            root = psutil.Process(proc.pid)
            found += [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
    return found


def _environ(proc: psutil.Process) -> str:
    """NUL-separated, with a leading NUL: `\0NAME=` finds a variable by its whole name."""
    try:
        return "\0" + Path(f"/proc/{proc.pid}/environ").read_bytes().decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return ""


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(900)
def test_no_canary_reaches_any_child_and_the_stack_still_runs_a_flow(canaries, tmp_path: Path) -> None:
    config = UpConfig(
        run_dir=tmp_path / "up",
        project_dir=REPO,
        ui=False,
        worker_query_seconds=2,
        worker_env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
        evaluator_params={"episodes_per_task": 1, "poll_seconds": 1.0},
    )
    with Stack(config) as stack:
        # The continuous evaluator is a flow run that a worker started: wait until it runs.
        deadline = time.monotonic() + 300
        while True:
            with stack.api() as client:
                state = client.read_flow_run(stack.evaluator_run_id).state
            if state is not None and state.is_running():
                break
            assert state is None or not state.is_final(), state
            assert time.monotonic() < deadline, f"the evaluator's flow run never started: {state}"
            time.sleep(2)
        family = _family(stack)
        environs = {f"{p.pid} {' '.join(p.cmdline()[:6])}": _environ(p) for p in family}
        workers = [name for name in stack.procs if name.startswith("worker-")]
    assert len(workers) == 5 and len(family) >= 3 + 5 + 1, sorted(environs)
    assert any("\0DISTRL_STORE_URI=s3://" in text for text in environs.values())  # the stack's own
    # Values, not names: the MLflow server sets its own MLFLOW_TRACKING_URI for its workers.
    needles = [*CANARIES.values(), *CANARY_PARTS]
    leaks = {where: sorted(n for n in needles if n in text) for where, text in environs.items()}
    assert {where: found for where, found in leaks.items() if found} == {}
    assert os.environ["HF_TOKEN"] == CANARIES["HF_TOKEN"]  # the canaries were there to leak
