"""`distrl up` hands each child only the credentials it uses: the user's own
`AWS_SESSION_TOKEN` reached every server and worker (and the S3 server's 0644 log), the judge's key
every server. Now: Prefect and moto get none, MLflow moto's dummy S3 keys, the workers those and
the judge's key; every log is 0600."""

from __future__ import annotations

from pathlib import Path

import pytest

from ops import processes
from ops.up import Stack, UpConfig

REPO = Path(__file__).resolve().parents[2]
TOKEN = "FwoGZXIvYXdzEXAMPLEsessiontoken-canary-81f2"
KEY_ID = "ASIAREALUSERKEY00001"
JUDGE = "sk-judge-canary-up-4410"


@pytest.fixture
def user_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "real-user-secret-canary-77")
    monkeypatch.setenv("AWS_PROFILE", "production")
    monkeypatch.setenv("DISTRL_JUDGE_API_KEY", JUDGE)


def _envs(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, str]]:
    """The environment each child would start with (recorded at `processes.start`, nothing started)."""
    seen: dict[str, dict[str, str]] = {}

    def record(name: str, argv: list[str], *, env: dict[str, str], **_: object) -> processes.Managed:
        seen[name] = env
        raise _Recorded

    monkeypatch.setattr(processes, "start", record)
    stack.ports = {"s3": 9001, "mlflow": 9002, "prefect": 9003}
    for launch in (*(lambda n=n: stack._launch(n) for n in ("s3", "mlflow", "prefect")), stack._start_deploy):
        with pytest.raises(_Recorded):
            launch()
    with pytest.raises(_Recorded):
        stack._start_workers()  # the first worker; the others are built the same way
    return seen


class _Recorded(Exception):
    pass


def test_each_child_gets_only_what_it_uses(user_credentials, tmp_path, monkeypatch) -> None:
    stack = Stack(UpConfig(run_dir=tmp_path / "up", project_dir=REPO))
    envs = _envs(stack, monkeypatch)
    worker = next(name for name in envs if name.startswith("worker"))
    for name, env in envs.items():
        text = repr(env)
        assert TOKEN not in text and KEY_ID not in text and "real-user-secret" not in text, name
        assert "AWS_PROFILE" not in env and env["AWS_SHARED_CREDENTIALS_FILE"] == "/dev/null", name
        assert (JUDGE in text) == (name == worker), name
        has_keys = env.get("AWS_ACCESS_KEY_ID") == "testing"
        assert has_keys == (name in ("mlflow", worker)), name


def test_a_real_child_environment_and_its_log(user_credentials, tmp_path) -> None:
    """One real child (the moto server): its /proc environ and its log file."""
    stack = Stack(UpConfig(run_dir=tmp_path / "up", project_dir=REPO))
    stack._prepare_run_dir()
    try:
        stack._launch("s3")
        stack._await_server("s3", 0.0)
        environ = Path(f"/proc/{stack.procs['s3'].pid}/environ").read_bytes().decode()
        log = stack.procs["s3"].log_path
    finally:
        stack.stop()
    assert TOKEN not in environ and JUDGE not in environ and "AWS_ACCESS_KEY_ID" not in environ
    assert log.stat().st_mode & 0o777 == 0o600
