"""`distrl up` children inherit by allowlist, per role (ops/up_env.py): HF_TOKEN, GITHUB_TOKEN,
MLFLOW_TRACKING_PASSWORD, PREFECT_API_KEY, PREFECT_API_AUTH_STRING, legacy AWS_ACCESS_KEY, a
password inside MLFLOW_TRACKING_URI and an unknown variable all reached moto, MLflow, the Prefect
server and every worker through a denylist. Here, each role's allowlist; that none reaches any
child's /proc/<pid>/environ of a real stack, and the stack still deploys, its workers report and a
worker runs a flow, is checked on tests/integration/test_deployments.py's stack (started with these
canaries set: one stack start-up fewer)."""

from __future__ import annotations

import pytest

from bench.faults_lease import CANARIES
from ops import up_env


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
