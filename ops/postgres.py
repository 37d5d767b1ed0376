"""PostgreSQL for the Prefect and MLflow servers of `distrl up` (its default where installed; `--database
postgres` insists on it, `--database sqlite` never uses it).

SQLite serialises every write: under a stack's bursts of task runs and heartbeats the Prefect server
logs "database is locked" and answers 503 for a while. With PostgreSQL both servers write
concurrently. Two ways to get one:

- `LocalPostgres` (the default): `initdb` into `<run dir>/postgres/data` and a `postgres` server on a
  free loopback port, started as a child of the stack and stopped with it; the binaries are Debian's
  (`make postgres-deps`), found under /usr/lib/postgresql/*/bin. PostgreSQL refuses to run as root,
  so when `distrl up` runs as root both run as `DISTRL_POSTGRES_OS_USER` (`postgres`, which
  Debian's package creates); otherwise as the invoking user.
- `DISTRL_POSTGRES_URL=postgresql://USER:PASSWORD@HOST:PORT`: an existing server, on which the stack
  recreates its two databases (moto keeps S3 in memory: old runs would point at nothing).

The password never reaches an argv, a log or `state.json`: the servers get URLs without it and the
password as `PGPASSWORD` (libpq and asyncpg both read it); it is registered with
`storage.secrets`, so any message that quotes it is redacted.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from ops import processes
from storage.secrets import redact, register_secret

HOST = "127.0.0.1"
DEBIAN_BIN_DIRS = "/usr/lib/postgresql/*/bin"
# The stack owns these two databases: it drops and creates them at each start (throwaway names,
# unlike a team server's `prefect` and `mlflow` of docs/operations.md).
PREFECT_DB = "distrl_up_prefect"
MLFLOW_DB = "distrl_up_mlflow"
LOCAL_USER = "distrl"
# Statements of the setup; identifiers cannot be bound parameters, so they are quoted by psycopg.
DROP_DATABASE = "DROP DATABASE IF EXISTS {}"
CREATE_DATABASE = "CREATE DATABASE {}"
# Why the default stack fell back to SQLite, and what that costs.
SQLITE_NOTE = "SQLite instead, which may log `database is locked` under load"
# In angle brackets: `redact` masks the userinfo of a real-looking URL, even an example.
URL_EXAMPLE = "postgresql://<user>:<password>@<host>:5432"


class PostgresError(RuntimeError):
    """A one-line problem of the PostgreSQL setup, naming the fix (any password already redacted)."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


class PostgresMissing(PostgresError):
    """PostgreSQL's server programs are not installed."""


class PostgresSettings(BaseSettings):
    """PostgreSQL of `distrl up --database postgres`, read from `DISTRL_POSTGRES_*` variables."""

    model_config = SettingsConfigDict(env_prefix="DISTRL_POSTGRES_", extra="ignore")

    url: SecretStr | None = Field(
        None,
        description=f"An existing server (`{URL_EXAMPLE}`, no database name) on which `distrl up "
        f"--database postgres` drops and creates `{PREFECT_DB}` and `{MLFLOW_DB}`; unset: it starts a "
        "server of its own under its folder.",
    )
    bin_dir: Path | None = Field(
        None,
        description="Folder of PostgreSQL's `initdb` and `postgres`; default: the newest "
        f"`{DEBIAN_BIN_DIRS}`, else PATH.",
    )
    os_user: str = Field(
        "postgres",
        description="The unprivileged user the local server runs as when `distrl up` runs as root "
        "(PostgreSQL refuses root). Where that user cannot enter the stack's folder (a private home such "
        "as `/root`), the cluster lives in `$TMPDIR/distrl-postgres-<hash>`, started empty at each "
        "`distrl up` (`--database auto` or `postgres`) and removed when it stops.",
    )


@dataclass(frozen=True)
class Server:
    """Where a PostgreSQL server answers; `repr` and every URL leave the password out."""

    host: str
    port: int
    user: str
    password: str = field(repr=False)

    def url(self, database: str, driver: str = "") -> str:
        scheme = f"postgresql+{driver}" if driver else "postgresql"
        return f"{scheme}://{quote(self.user, safe='')}@{self.host}:{self.port}/{database}"

    def env(self) -> dict[str, str]:
        """What a client needs besides the URL."""
        return {"PGPASSWORD": self.password} if self.password else {}


def parse_url(text: str) -> Server:
    """`postgresql://USER:PASSWORD@HOST:PORT` → a Server; anything else is a one-line PostgresError."""
    where = f"DISTRL_POSTGRES_URL ({redact(text)!r})"
    parts = urlsplit(text.strip())
    if parts.scheme not in ("postgresql", "postgres"):
        hint = " without a driver: each server picks its own" if parts.scheme.startswith("postgres") else ""
        raise PostgresError(f"{where} must start with postgresql://{hint}; e.g. {URL_EXAMPLE}")
    try:
        port = parts.port or 5432
    except ValueError:
        raise PostgresError(
            f"{where} has a port that is not a number in 1-65535; e.g. {URL_EXAMPLE}"
        ) from None
    if not parts.hostname or not parts.username:
        raise PostgresError(f"{where} needs a user and a host; e.g. {URL_EXAMPLE}")
    if parts.path.strip("/") or parts.query or parts.fragment:
        raise PostgresError(
            f"{where} names a database or options: give only the server; `distrl up` uses "
            f"{PREFECT_DB} and {MLFLOW_DB} there; e.g. {URL_EXAMPLE}"
        )
    password = unquote(parts.password) if parts.password else os.environ.get("PGPASSWORD", "")
    register_secret(password, "postgres password")
    return Server(parts.hostname, port, unquote(parts.username), password)


def find_bin_dir(configured: Path | None = None, debian_dirs: str = DEBIAN_BIN_DIRS) -> Path:
    """The folder of `initdb` and `postgres`, or PostgresMissing naming how to install them."""
    if configured is not None:
        if not (configured / "initdb").is_file():
            raise PostgresMissing(
                f"DISTRL_POSTGRES_BIN_DIR={configured} holds no initdb: point it at PostgreSQL's bin "
                f"folder (e.g. {DEBIAN_BIN_DIRS.replace('*', '15')}) or unset it"
            )
        return configured
    debian = [Path(p) for p in glob.glob(debian_dirs) if (Path(p) / "initdb").is_file()]
    if debian:
        return max(debian, key=lambda p: _version(p.parent.name))
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    raise PostgresMissing(
        "PostgreSQL's server programs (initdb, postgres) are not installed: run `make postgres-deps` "
        "(Debian's postgresql package), or set DISTRL_POSTGRES_BIN_DIR to their folder"
    )


def _version(name: str) -> tuple[int, ...]:
    return tuple(int(x) for x in name.split(".") if x.isdigit())


class LocalPostgres:
    """A cluster under `root` (created on first use) and the argv of its server on `port`."""

    def __init__(self, root: Path, settings: PostgresSettings) -> None:
        self.root = root
        self.data = root / "data"
        self.bin_dir = find_bin_dir(settings.bin_dir)
        # PostgreSQL refuses root: as root, run it as an unprivileged user.
        self.os_user = settings.os_user if os.geteuid() == 0 else None
        self.password = secrets.token_urlsafe(24)
        register_secret(self.password, "postgres password")

    def move_to(self, root: Path) -> None:
        """Keep the cluster under `root` instead (before `init`; the password stays)."""
        self.root, self.data = root, root / "data"

    def init(self) -> None:
        # The cluster is the stack's own and starts empty, as the stack's folder does: a cluster left
        # outside that folder by an earlier stack (see `cluster_outside`) would make initdb refuse.
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)
        if self.os_user is not None:
            self._hand_over()
        pwfile = self.root / "pwfile"
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(fd, "w") as f:
            f.write(self.password + "\n")
        if self.os_user is not None:
            shutil.chown(pwfile, self.os_user)
        argv = [str(self.bin_dir / "initdb"), "-D", str(self.data), "-U", LOCAL_USER]
        argv += ["--pwfile", str(pwfile), "--auth", "scram-sha-256", "-E", "UTF8", "--no-instructions"]
        try:
            done = subprocess.run(
                argv,
                cwd=self.root,
                capture_output=True,
                text=True,
                env={"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"},
                **processes.as_user(self.os_user),
            )
        finally:
            pwfile.unlink(missing_ok=True)
        if done.returncode != 0:
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise PostgresError(f"initdb failed in {self.data}: {last[0]}")

    def _hand_over(self) -> None:
        """Give `root` to the server's user, after checking that user exists and can reach it."""
        assert self.os_user is not None
        try:
            processes.as_user(self.os_user)
        except KeyError:
            raise PostgresError(
                f"PostgreSQL refuses to run as root and there is no user {self.os_user!r}: create one "
                "(Debian's postgresql package does) or set DISTRL_POSTGRES_OS_USER to an unprivileged user"
            ) from None
        shutil.chown(self.root, self.os_user)
        self.root.chmod(0o700)
        reach = subprocess.run(["test", "-w", str(self.root)], **processes.as_user(self.os_user))
        if reach.returncode != 0:
            raise PostgresError(
                f"user {self.os_user!r} (PostgreSQL refuses root) cannot reach {self.root}: a folder above "
                "it is private; choose a --dir under folders others may enter"
            )

    def argv(self, port: int) -> list[str]:
        return [
            *(str(self.bin_dir / "postgres"), "-D", str(self.data), "-p", str(port)),
            *("-c", f"listen_addresses={HOST}", "-c", "unix_socket_directories="),
            # The stack's folder is wiped at each start anyway: a crash may lose the last commits,
            # never corrupt the cluster, and commits no longer wait for the disk.
            *("-c", "synchronous_commit=off"),
        ]

    def server(self, port: int) -> Server:
        return Server(HOST, port, LOCAL_USER, self.password)


def connect(server: Server, database: str = "postgres", timeout_s: int = 5, **kwargs: Any) -> Any:
    import psycopg

    return psycopg.connect(
        host=server.host,
        port=server.port,
        user=server.user,
        password=server.password or None,
        dbname=database,
        connect_timeout=timeout_s,
        **kwargs,
    )


def answers(server: Server) -> bool:
    with connect(server, timeout_s=2):
        return True


def recreate_databases(server: Server) -> None:
    """Empty PREFECT_DB and MLFLOW_DB (the servers create their tables when they start)."""
    import psycopg
    from psycopg import sql

    try:
        conn = connect(server, autocommit=True)  # CREATE DATABASE cannot run in a transaction
    except psycopg.Error as exc:
        raise PostgresError(
            f"cannot connect to PostgreSQL at {server.host}:{server.port} as {server.user}: "
            f"{_first_line(exc)}; check DISTRL_POSTGRES_URL (e.g. {URL_EXAMPLE})"
        ) from None
    try:
        with conn.cursor() as cur:
            for name in (PREFECT_DB, MLFLOW_DB):
                cur.execute(sql.SQL(DROP_DATABASE).format(sql.Identifier(name)))
                cur.execute(sql.SQL(CREATE_DATABASE).format(sql.Identifier(name)))
    except psycopg.Error as exc:
        raise PostgresError(
            f"cannot recreate {PREFECT_DB} and {MLFLOW_DB} on {server.host}:{server.port}: {_first_line(exc)}; "
            "the user needs CREATEDB, and no other stack may be using them"
        ) from None
    finally:
        conn.close()


def plan(run_dir: Path) -> Server | LocalPostgres:
    """DISTRL_POSTGRES_URL's server, or the one to start under `run_dir`; a bad setting fails here,
    before anything starts. As root, when the server's user cannot enter `run_dir` (a stack folder
    under a private home such as /root), its cluster lives apart (`cluster_outside`), for
    `--database postgres` as for `auto`."""
    settings = PostgresSettings()
    if settings.url is not None:
        return parse_url(settings.url.get_secret_value())
    local = LocalPostgres(run_dir / "postgres", settings)
    user = local.os_user
    if user is not None and _user_exists(user) and not _can_enter(user, run_dir):
        outside = cluster_outside(run_dir)
        if _can_enter(user, outside.parent):
            local.move_to(outside)
    return local


def plan_default(run_dir: Path) -> tuple[Server | LocalPostgres | None, str]:
    """`distrl up`'s default: PostgreSQL when DISTRL_POSTGRES_URL is set or the programs are installed
    (and, as root, their unprivileged user exists and can reach its cluster, under `run_dir` or
    apart); else None and a one-line note on SQLite."""
    try:
        planned = plan(run_dir)
    except PostgresMissing:
        return None, f"PostgreSQL is not installed (`make postgres-deps`): {SQLITE_NOTE}"
    if not isinstance(planned, LocalPostgres) or planned.os_user is None:
        return planned, ""
    user = planned.os_user
    if not _user_exists(user):
        return None, f"no user {user!r} to run PostgreSQL as (it refuses root): {SQLITE_NOTE}"
    if _can_enter(user, run_dir):
        return planned, ""
    if planned.root != cluster_outside(run_dir):  # plan() found no folder apart the user can reach
        return None, f"user {user!r} (PostgreSQL refuses root) cannot enter {run_dir}: {SQLITE_NOTE}"
    return (
        planned,
        f"user {user!r} (PostgreSQL refuses root) cannot enter {run_dir}: the cluster is in {planned.root}",
    )


def remove_cluster_apart(run_dir: Path) -> None:
    """Delete the cluster a stopped stack kept apart (`cluster_outside`), if it had one: it holds
    nothing the next start keeps, and every stack folder would otherwise leave one behind."""
    shutil.rmtree(cluster_outside(run_dir), ignore_errors=True)


def cluster_outside(run_dir: Path) -> Path:
    """The cluster's folder for a stack folder its server's user cannot enter: one per stack folder
    under the system's temporary folder (1777, so the user can reach it), private to that user."""
    digest = hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"distrl-postgres-{digest}"


def _user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _can_enter(user: str, folder: Path) -> bool:
    """Whether `user` can reach `folder` (every folder above it must let others through)."""
    return subprocess.run(["test", "-x", str(folder)], **processes.as_user(user)).returncode == 0


def start_database(
    planned: Server | LocalPostgres, run_dir: Path, timeout_s: float, *, outlive_parent: bool = False
) -> tuple[Server, processes.Managed | None]:
    """The server with its two databases empty, and the process of the one started here (to be stopped
    with the stack; its log is `<run dir>/logs/postgres.log`)."""
    if isinstance(planned, Server):
        recreate_databases(planned)
        return planned, None
    planned.init()
    port = processes.free_port(HOST)
    server = planned.server(port)
    env = {"PATH": os.environ.get("PATH", ""), "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    log = run_dir / "logs" / "postgres.log"
    proc = processes.start(
        "postgres",
        planned.argv(port),
        env=env,
        log_path=log,
        user=planned.os_user,
        outlive_parent=outlive_parent,
    )
    try:
        processes.wait_until(lambda: answers(server), what="postgres server", timeout_s=timeout_s, proc=proc)
        recreate_databases(server)
    except BaseException:
        processes.stop_tree([proc.pid])
        raise
    return server, proc


def stop_server(proc: processes.Managed, grace_s: float = 10.0) -> None:
    """A fast shutdown (SIGINT: sessions end, a checkpoint is written), then whatever is left."""
    import signal

    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.popen.wait(timeout=grace_s)
    processes.stop_tree([proc.pid], grace_s=2)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
