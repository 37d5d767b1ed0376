"""`distrl up --database postgres` before any server starts (ops/postgres.py): a bad
DISTRL_POSTGRES_URL or a missing PostgreSQL is one line naming the fix, and the password reaches no
message, URL, argv or child environment. The stack itself runs in tests/integration/test_deployments.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ops import postgres, processes
from ops.postgres import LocalPostgres, PostgresError, PostgresMissing, PostgresSettings, parse_url
from storage.secrets import redact

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "s3cret-Pw-4711"


@pytest.mark.parametrize(
    ("url", "names"),
    [
        (
            f"mysql://distrl:{PASSWORD}@db:3306",
            ["must start with postgresql://", "postgresql://<user>:<password>@<host>:5432"],
        ),
        (f"postgresql+asyncpg://distrl:{PASSWORD}@db", ["without a driver"]),
        (f"postgresql://distrl:{PASSWORD}@db:99999", ["port", "1-65535"]),
        (f"postgresql://distrl:{PASSWORD}@db:54x2", ["port"]),
        (f"postgresql://{PASSWORD}@:5432", ["a user and a host"]),
        ("postgresql://db.example:5432", ["a user and a host"]),
        (
            f"postgresql://distrl:{PASSWORD}@db:5432/prefect",
            ["distrl_up_prefect", "distrl_up_mlflow", "only the server"],
        ),
        (f"postgresql://distrl:{PASSWORD}@db:5432?sslmode=require", ["only the server"]),
    ],
)
def test_a_bad_url_is_one_line_naming_the_fix_without_the_password(url: str, names: list[str]) -> None:
    with pytest.raises(PostgresError) as caught:
        parse_url(url)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("DISTRL_POSTGRES_URL"), message
    assert all(name in message for name in names), message
    assert PASSWORD not in message, message


def test_a_good_url_gives_password_free_urls_and_a_redacted_password(monkeypatch) -> None:
    monkeypatch.delenv("PGPASSWORD", raising=False)
    server = parse_url(f"postgresql://team%40lab:{PASSWORD}@db.example:6543")
    assert (server.host, server.port, server.user) == ("db.example", 6543, "team@lab")
    assert (
        server.url("distrl_up_prefect", "asyncpg")
        == "postgresql+asyncpg://team%40lab@db.example:6543/distrl_up_prefect"
    )
    assert PASSWORD not in server.url("distrl_up_mlflow") and PASSWORD not in repr(server)
    assert server.env() == {"PGPASSWORD": PASSWORD}
    # Registered: any message quoting it (a driver's error, a traceback) is scrubbed.
    assert PASSWORD not in redact(f"FATAL: password {PASSWORD} rejected")
    assert parse_url("postgres://u@h").port == 5432  # libpq's other scheme and default port


def test_the_password_is_a_secret_children_do_not_inherit(monkeypatch) -> None:
    monkeypatch.setenv("PGPASSWORD", "pg-own-password-1")
    monkeypatch.setenv("DISTRL_POSTGRES_URL", f"postgresql://u:{PASSWORD}@h")
    assert "pg-own-password-1" not in redact("connecting with pg-own-password-1")
    inherited = processes.without_credentials(os.environ)
    assert "PGPASSWORD" not in inherited and "DISTRL_POSTGRES_URL" not in inherited


def test_an_unreachable_server_is_one_line_without_the_password() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        server = parse_url(f"postgresql://distrl:{PASSWORD}@127.0.0.1:{port}")
        with pytest.raises(PostgresError) as caught:
            postgres.recreate_databases(server)
    message = str(caught.value)
    assert "\n" not in message and "cannot connect" in message and "DISTRL_POSTGRES_URL" in message, message
    assert PASSWORD not in message


def test_missing_postgresql_names_make_postgres_deps(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(PostgresMissing, match=r"make postgres-deps.*DISTRL_POSTGRES_BIN_DIR"):
        postgres.find_bin_dir(debian_dirs=str(tmp_path / "none" / "*" / "bin"))
    with pytest.raises(PostgresMissing, match=r"DISTRL_POSTGRES_BIN_DIR=.* holds no initdb"):
        postgres.find_bin_dir(tmp_path)


def test_the_newest_debian_version_is_chosen(tmp_path: Path) -> None:
    for version in ("9.6", "15", "13"):
        (tmp_path / version / "bin").mkdir(parents=True)
        (tmp_path / version / "bin" / "initdb").touch()
    assert postgres.find_bin_dir(debian_dirs=str(tmp_path / "*" / "bin")) == tmp_path / "15" / "bin"


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the server as another user")
def test_as_root_a_missing_server_user_names_the_setting(tmp_path: Path) -> None:
    (tmp_path / "initdb").touch()
    local = LocalPostgres(tmp_path / "pg", PostgresSettings(bin_dir=tmp_path, os_user="no-such-user-here"))
    with pytest.raises(PostgresError, match=r"refuses to run as root.*DISTRL_POSTGRES_OS_USER"):
        local.init()


def test_bad_url_from_the_command_line(tmp_path: Path) -> None:
    """The whole command: exit 1, one `error:` line, no password, nothing started."""
    env = {**os.environ, "DISTRL_POSTGRES_URL": f"postgresql+psycopg://distrl:{PASSWORD}@db:5432"}
    argv = [sys.executable, "-m", "ops.cli", "up", "--database", "postgres", "--dir", str(tmp_path / "up")]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert done.returncode == 1 and len(errors) == 1, done.stderr
    assert "without a driver" in errors[0] and PASSWORD not in done.stdout + done.stderr
    state = (tmp_path / "up" / "state.json").read_text()
    assert '"processes": []' in state and "s3" not in state  # refused before the first server


def test_only_the_two_servers_get_the_password(tmp_path: Path, monkeypatch) -> None:
    """Prefect and MLflow get password-free URLs and the password as PGPASSWORD; moto, the deploy and
    the workers get neither it nor the user's own PGPASSWORD."""
    from ops.up import Stack, UpConfig
    from ops.up_env import server_argv
    from tests.reliability.test_child_credentials import _envs

    monkeypatch.setenv("PGPASSWORD", "users-own-pg-password")
    stack = Stack(UpConfig(run_dir=tmp_path / "up", project_dir=ROOT, database="postgres"))
    stack.database = postgres.Server("127.0.0.1", 5544, "distrl", PASSWORD)
    envs = _envs(stack, monkeypatch)
    for name, env in envs.items():
        assert "users-own-pg-password" not in repr(env), name
        assert (env.get("PGPASSWORD") == PASSWORD) == (name in ("prefect", "mlflow")), name
        assert PASSWORD not in repr({k: v for k, v in env.items() if k != "PGPASSWORD"}), name
    assert envs["prefect"]["PREFECT_SERVER_DATABASE_CONNECTION_URL"] == (
        "postgresql+asyncpg://distrl@127.0.0.1:5544/distrl_up_prefect"
    )
    argv = server_argv(stack, "mlflow", 1)
    assert (
        argv[argv.index("--backend-store-uri") + 1] == "postgresql://distrl@127.0.0.1:5544/distrl_up_mlflow"
    )
