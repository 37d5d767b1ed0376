"""`distrl up`: the distributed setup on one machine, on loopback, for trying it (and for testing it).

`Stack` starts, each as a subprocess in its own process group on a free loopback port:
- a moto S3 server with a bucket: the trajectory store (`s3://<bucket>/store`);
- an MLflow tracking server that proxies artifacts into the same bucket (`s3://<bucket>/mlflow`), so
  clients need only its URL, as with a real team server;
- a Prefect server (its own PREFECT_HOME under the run folder);
- both servers on PostgreSQL (a server of the stack's own or DISTRL_POSTGRES_URL's, ops/postgres.py)
  or on SQLite files in the run folder; the default (`auto`) takes PostgreSQL where it can;
then creates the process work pools named in prefect.yaml, runs `prefect --no-prompt deploy --all`
and starts one process worker per pool with the variables a machine of that role needs. `stop()`
ends every process it started, their flow runs included. The integration test uses the same class.

S3 keys are moto's dummy ones, in `env.sh` (mode 600) and in the children that use S3 (MLflow server,
workers); each child inherits only the variables its role needs (an allowlist), so no child gets the
user's own credentials; the judge's key goes to the workers only. Each child's environment and each
server's command line are built in ops/up_env.py.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from ops import postgres, processes, up_env
from ops.processes import Managed, ProcessExited
from ops.quiet import QUIET_ENV
from ops.up_config import COLLECT_MINUTES, LEARN_MINUTES, UpConfig, read_deployments, recipe, work_pools
from ops.up_env import CLIENT_MAX_RETRIES, DUMMY_S3_KEYS, HOST

STATE_FILE = "state.json"
EVALUATOR_DEPLOYMENT = "evaluator/evaluator"
_HEALTH = {"s3": "/moto-api/", "mlflow": "/health", "prefect": "/api/health"}


__all__ = [
    "COLLECT_MINUTES",
    "LEARN_MINUTES",
    "Stack",
    "UpConfig",
    "down",
    "read_deployments",
    "recipe",
    "work_pools",
]


class Stack:
    """Start with `start()` or `with Stack(config) as stack:`; everything stops on exit."""

    def __init__(self, config: UpConfig | None = None) -> None:
        self.config = config or UpConfig()
        # True for `distrl up --detach`: the servers and workers outlive the command that started
        # them (else the kernel stops them when it exits), and `distrl up --down` stops them.
        self.outlive_parent = False
        self.run_dir = self.config.run_dir.resolve()
        self.project_dir = self.config.project_dir.resolve()
        self.pools = work_pools(self.project_dir)
        self.procs: dict[str, Managed] = {}
        self.ports: dict[str, int] = {}
        self.timings: dict[str, float] = {}
        self._owns_run_dir = False  # set once this stack has claimed run_dir (another may own it)
        self.evaluator_run_id: str | None = None  # the continuous evaluator's flow run, once started
        self.mlflow_runs_url = ""  # the experiment's runs table, once MLflow answers
        self.database: postgres.Server | None = None  # PostgreSQL of both servers, once it answers
        self.database_note = ""  # why `database="auto"` chose SQLite, or where its cluster went

    # ----- addresses and environment --------------------------------------------------------------
    def url(self, name: str) -> str:
        return f"http://{HOST}:{self.ports[name]}"

    @property
    def prefect_api_url(self) -> str:
        return self.url("prefect") + "/api"

    @property
    def store_uri(self) -> str:
        return f"s3://{self.config.bucket}/store"

    def client_env(self) -> dict[str, str]:
        """The variables any machine of this setup needs (a worker, the CLI, `distrl sql`)."""
        return {
            "PREFECT_API_URL": self.prefect_api_url,
            "DISTRL_STORE_URI": self.store_uri,
            "DISTRL_S3_ENDPOINT_URL": self.url("s3"),
            "DISTRL_MLFLOW_TRACKING_URI": self.url("mlflow"),
            "DISTRL_MLFLOW_CACHE_DIR": str(self.run_dir / "policy-cache"),
            "DISTRL_PROJECT_DIR": str(self.project_dir),
            "AWS_DEFAULT_REGION": "us-east-1",
            **DUMMY_S3_KEYS,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            **QUIET_ENV,
        }

    @contextlib.contextmanager
    def api(self) -> Iterator:
        """A synchronous Prefect client of this stack's server."""
        from prefect.client.orchestration import get_client
        from prefect.settings import PREFECT_API_URL, PREFECT_CLIENT_MAX_RETRIES, temporary_settings

        settings = {PREFECT_API_URL: self.prefect_api_url, PREFECT_CLIENT_MAX_RETRIES: CLIENT_MAX_RETRIES}
        with temporary_settings(settings), get_client(sync_client=True) as c:
            yield c

    # ----- start ----------------------------------------------------------------------------------
    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Stack:
        """Servers start together; the deploy and the workers start once Prefect answers, while
        MLflow may still be starting (on a busy machine each server takes tens of seconds)."""
        started = time.monotonic()
        self._prepare_run_dir()
        try:
            database = self._plan_database()
            self._launch("s3")
            if database is not None:
                self._start_database(database, started)
            for name in ("mlflow", "prefect"):
                self._launch(name)
            self._await_server("s3", started)
            self._create_bucket()
            self._await_server("prefect", started)
            self._create_pools()
            deploy = self._start_deploy() if self.config.deploy else None
            if self.config.workers:
                self._start_workers()
            self._await_server("mlflow", started)
            self._prepare_mlflow()
            if deploy is not None:
                self._finish_deploy(deploy, started)
            if self.config.workers:
                self._await_workers(started)
                if deploy is not None and self.config.evaluator:
                    self._start_evaluator()
            self._write_env_file()
        except BaseException:
            self.stop()
            raise
        self.timings["total_s"] = time.monotonic() - started
        return self

    def _plan_database(self) -> postgres.Server | postgres.LocalPostgres | None:
        """PostgreSQL's plan, or None for SQLite (`auto` says why in `database_note`)."""
        if self.config.database == "auto":
            planned, self.database_note = postgres.plan_default(self.run_dir)
            return planned
        return postgres.plan(self.run_dir) if self.config.database == "postgres" else None

    def _start_database(self, planned: postgres.Server | postgres.LocalPostgres, started: float) -> None:
        self.database, proc = postgres.start_database(
            planned, self.run_dir, self.config.startup_timeout_s, outlive_parent=self.outlive_parent
        )
        if proc is not None:
            self.procs["postgres"] = proc
            self.ports["postgres"] = self.database.port
            self._write_state()
        self.timings["database_ready_s"] = time.monotonic() - started

    def _prepare_mlflow(self) -> None:
        """The experiment, tagged to open on its runs table: the URL printed leads there."""
        from storage.registry import PolicyRegistry, RegistrySettings
        from tasks import mlflow_ui

        uri = self.url("mlflow")
        registry = PolicyRegistry(RegistrySettings(tracking_uri=uri))
        experiment = registry.experiment_id()
        mlflow_ui.prepare_experiment(registry.client, experiment)
        self.mlflow_runs_url = mlflow_ui.experiment_url(uri, experiment)

    def _prepare_run_dir(self) -> None:
        state = self.run_dir / STATE_FILE
        if state.exists():
            if down(self.run_dir, dry_run=True):
                raise RuntimeError(
                    f"a stack is already running from {self.run_dir}: stop it first (`distrl up --down`)"
                )
            shutil.rmtree(self.run_dir)  # moto keeps S3 in memory: old databases would point at nothing
        elif self.run_dir.exists() and any(self.run_dir.iterdir()):
            raise RuntimeError(
                f"{self.run_dir} is not empty and not a `distrl up` folder; choose another --dir"
            )
        (self.run_dir / "prefect").mkdir(parents=True, exist_ok=True)
        self._owns_run_dir = True
        self._write_state()

    def _launch(self, name: str) -> None:
        port = processes.free_port(HOST)
        self.ports[name] = port
        env = up_env.server_env(self, name)
        log = self.run_dir / "logs" / f"{name}.log"
        self.procs[name] = processes.start(
            name,
            up_env.server_argv(self, name, port),
            env=env,
            log_path=log,
            outlive_parent=self.outlive_parent,
        )
        self._write_state()

    def _await_server(self, name: str, started: float) -> None:
        """Wait for a server's health check; one that lost its port to another process is restarted."""
        for attempt in range(3):
            try:
                processes.wait_until(
                    processes.http_ok(self.url(name) + _HEALTH[name]),
                    what=f"{name} server",
                    timeout_s=self.config.startup_timeout_s,
                    proc=self.procs[name],
                )
                break
            except ProcessExited as exc:
                if not exc.port_taken or attempt == 2:
                    raise
                self._launch(name)
                if name == "s3":  # MLflow would write artifacts to the old endpoint
                    processes.stop_tree([self.procs["mlflow"].pid])
                    self._launch("mlflow")
        self.timings[f"{name}_ready_s"] = time.monotonic() - started

    def _create_bucket(self) -> None:
        import boto3

        s3 = boto3.client(
            "s3",
            endpoint_url=self.url("s3"),
            region_name="us-east-1",
            aws_access_key_id=DUMMY_S3_KEYS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=DUMMY_S3_KEYS["AWS_SECRET_ACCESS_KEY"],
        )
        s3.create_bucket(Bucket=self.config.bucket)

    def _create_pools(self) -> None:
        from prefect.client.schemas.actions import WorkPoolCreate
        from prefect.workers.process import ProcessWorker

        template = ProcessWorker.get_default_base_job_template()
        with self.api() as client:
            for pool in self.pools:
                client.create_work_pool(
                    WorkPoolCreate(name=pool, type="process", base_job_template=template), overwrite=True
                )

    def _start_deploy(self) -> Managed:
        log = self.run_dir / "logs" / "deploy.log"
        argv = [sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--all"]
        self.procs["deploy"] = processes.start(
            "deploy",
            argv,
            env=up_env.child_env(self, "deploy", s3_keys=False),
            log_path=log,
            cwd=self.project_dir,
            outlive_parent=self.outlive_parent,
        )
        return self.procs["deploy"]

    def _finish_deploy(self, proc: Managed, started: float) -> None:
        try:
            code = proc.popen.wait(timeout=self.config.startup_timeout_s)
        finally:
            processes.stop_tree([proc.pid], grace_s=2)
            self.procs.pop("deploy")
        expected = {d["name"] for d in read_deployments(self.project_dir)}
        with self.api() as client:
            found = {d.name for d in client.read_deployments()}
        if code != 0 or not expected <= found:
            raise RuntimeError(
                f"`prefect deploy --all` exited with {code}; missing deployments {sorted(expected - found)}; "
                f"its log ({proc.log_path}) ends with:\n{proc.tail()}"
            )
        self.timings["deployed_s"] = time.monotonic() - started

    def _start_workers(self) -> None:
        for pool in self.pools:
            home = self.run_dir / "workers" / pool
            home.mkdir(parents=True, exist_ok=True)
            ours = {
                "DISTRL_MLFLOW_CACHE_DIR": str(home / "policy-cache"),  # each machine caches its own versions
                "PREFECT_WORKER_QUERY_SECONDS": str(self.config.worker_query_seconds),
            }
            # Merged as dicts, not keywords: a variable named `server` in worker_env stays a variable.
            env = up_env.child_env(self, "worker", judge=True) | ours | self.config.worker_env
            argv = [sys.executable, "-m", "prefect", "worker", "start", "--pool", pool, "--type", "process"]
            argv += ["--name", f"{pool}-local", "--install-policy", "never"]
            log = self.run_dir / "logs" / f"worker-{pool}.log"
            self.procs[f"worker-{pool}"] = processes.start(
                f"worker {pool}", argv, env=env, log_path=log, cwd=home, outlive_parent=self.outlive_parent
            )
            self._write_state()

    def _await_workers(self, started: float) -> None:
        def all_online() -> bool:
            with self.api() as client:
                return all(client.read_workers_for_work_pool(pool) for pool in self.pools)

        deadline = time.monotonic() + self.config.startup_timeout_s
        while not all_online():
            for name, proc in self.procs.items():
                if name.startswith("worker-") and not proc.alive():
                    raise ProcessExited(proc)
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"workers did not report to the Prefect server within {self.config.startup_timeout_s:.0f} s"
                )
            time.sleep(0.5)
        self.timings["workers_s"] = time.monotonic() - started

    def _start_evaluator(self) -> None:
        """One run of the continuous evaluator, with the deployment's parameters (and any overrides)."""
        with self.api() as client:
            deployment = client.read_deployment_by_name(EVALUATOR_DEPLOYMENT)
            parameters = dict(deployment.parameters)
            parameters["params"] = dict(parameters.get("params") or {}) | self.config.evaluator_params
            run = client.create_flow_run_from_deployment(deployment.id, parameters=parameters)
        self.evaluator_run_id = str(run.id)

    # ----- state, description, stop ---------------------------------------------------------------
    def _write_state(self) -> None:
        if not self._owns_run_dir:
            return
        state = {
            "processes": [{"name": n, "pid": p.pid, "argv": p.argv} for n, p in self.procs.items()],
            "ports": self.ports,
        }
        (self.run_dir / STATE_FILE).write_text(json.dumps(state, indent=1))

    def _write_env_file(self) -> None:
        path = self.run_dir / "env.sh"
        lines = [f"export {k}={shlex.quote(v)}" for k, v in self.client_env().items()]
        # The venv's scripts (`prefect`, `distrl`, `mlflow`) for the README's next commands in a fresh shell.
        lines.append(f'export PATH={shlex.quote(str(Path(sys.executable).parent))}:"$PATH"')
        path.write_text("# source me: the variables of the `distrl up` stack\n" + "\n".join(lines) + "\n")
        path.chmod(0o600)

    def describe(self) -> str:
        """What `distrl up` prints once the stack is up: addresses, variables, the next commands."""
        from ops.up_describe import describe

        return describe(self, hidden=set(DUMMY_S3_KEYS))

    def stop(self) -> None:
        """Workers (and their flow runs) and servers together, then PostgreSQL once nothing uses it;
        SIGKILL after a grace period."""
        database = self.procs.pop("postgres", None)
        procs = list(self.procs.values())
        processes.stop_tree([p.pid for p in procs])
        for proc in procs:
            with contextlib.suppress(Exception):
                proc.popen.wait(timeout=5)
        if database is not None:
            postgres.stop_server(database)
            postgres.remove_cluster_apart(self.run_dir)
        self.procs.clear()
        self._write_state()  # no processes left; the file marks the folder as ours for the next `up`


def down(run_dir: Path, *, dry_run: bool = False) -> list[str]:
    """Stop what a detached (or killed) `distrl up` left running; returns the names found alive."""
    alive = processes.stop_recorded(Path(run_dir) / STATE_FILE, dry_run=dry_run)
    if not dry_run:
        postgres.remove_cluster_apart(Path(run_dir))
    return alive
