"""The hosts of `bench.multihost`: which processes run where, and the variables each gets.

Every host is configured only by addresses, as docs/operations.md ("Running across machines")
tells a user to configure real machines: PREFECT_API_URL, DISTRL_MLFLOW_TRACKING_URI,
DISTRL_STORE_URI with DISTRL_S3_ENDPOINT_URL, and S3 keys (moto's dummy ones). No host shares a
folder with another except the checkout (DISTRL_PROJECT_DIR), as machines share a git revision.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.netns import Network
from ops import processes
from ops.processes import Managed
from ops.quiet import QUIET_ENV

HEAD = "head"
COLLECTOR_A, COLLECTOR_B, LEARNER = "collector-a", "collector-b", "learner"
HOSTS = (HEAD, COLLECTOR_A, COLLECTOR_B, LEARNER)
# Work pool and deployment of each worker host (prefect.yaml).
POOLS = {COLLECTOR_A: "collectors-a", COLLECTOR_B: "collectors-b", LEARNER: "learner-gpu"}
DEPLOYMENTS = {
    COLLECTOR_A: "collect/collect-pool-a",
    COLLECTOR_B: "collect/collect-pool-b",
    LEARNER: "learn/learn",
}
PORTS = {"s3": 9000, "mlflow": 5000, "prefect": 4200}
HEALTH = {"s3": "/moto-api/", "mlflow": "/health", "prefect": "/api/health"}
DUMMY_S3_KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


@dataclass
class Hosts:
    """The processes of every host, started in their namespaces, logging under `run_dir/<host>/`."""

    net: Network
    run_dir: Path
    project_dir: Path
    bucket: str = "distrl"
    procs: dict[str, Managed] = field(default_factory=dict)

    def url(self, service: str) -> str:
        return f"http://{self.net.hosts[HEAD].address}:{PORTS[service]}"

    def address_env(self) -> dict[str, str]:
        """What any machine of the setup needs: the three addresses, the store and its keys."""
        return {
            "PREFECT_API_URL": self.url("prefect") + "/api",
            "DISTRL_MLFLOW_TRACKING_URI": self.url("mlflow"),
            "DISTRL_STORE_URI": f"s3://{self.bucket}/store",
            "DISTRL_S3_ENDPOINT_URL": self.url("s3"),
            "AWS_DEFAULT_REGION": "us-east-1",
            **DUMMY_S3_KEYS,
        }

    def _base_env(self, host: str) -> dict[str, str]:
        home = self.run_dir / host
        inherited = {
            k: v
            for k, v in processes.without_credentials(os.environ).items()
            # Nothing of this process's own setup: no proxy (the hosts' network is private), no
            # Prefect or DistRL setting but the ones given below.
            if "PROXY" not in k.upper() and not k.startswith(("PREFECT_", "DISTRL_", "MLFLOW_"))
        }
        return inherited | {
            "PREFECT_HOME": str(home / "prefect"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "DO_NOT_TRACK": "1",
            "PYTHONUNBUFFERED": "1",
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_CONFIG_FILE": os.devnull,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            **QUIET_ENV,
        }

    def worker_env(self, host: str) -> dict[str, str]:
        home = self.run_dir / host
        return (
            self._base_env(host)
            | self.address_env()
            | {
                "DISTRL_PROJECT_DIR": str(self.project_dir),
                "DISTRL_MLFLOW_CACHE_DIR": str(home / "policy-cache"),
                "PREFECT_WORKER_QUERY_SECONDS": "2",
                "PREFECT_CLIENT_MAX_RETRIES": "8",
                # One torch thread per flow run: every host shares this machine's cores.
                "OMP_NUM_THREADS": "1",
                "MKL_NUM_THREADS": "1",
            }
        )

    def _start(self, host: str, name: str, argv: list[str], env: dict[str, str], log: str) -> Managed:
        (self.run_dir / host).mkdir(parents=True, exist_ok=True)
        proc = processes.start(
            f"{host}/{name}",
            self.net.argv(host, argv),
            env=env,
            log_path=self.run_dir / host / log,
            cwd=self.run_dir / host,
        )
        self.procs[f"{host}/{name}"] = proc
        return proc

    def start_servers(self) -> None:
        """The head host: S3 (moto), MLflow (SQLite, artifacts proxied into the bucket), Prefect."""
        py, head = sys.executable, self.net.hosts[HEAD].address
        env = self._base_env(HEAD) | {
            "AWS_DEFAULT_REGION": "us-east-1",
            "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
            "PREFECT_SERVER_DATABASE_TIMEOUT": "60",
        }
        self._start(HEAD, "s3", [py, "-m", "moto.server", "-H", head, "-p", str(PORTS["s3"])], env, "s3.log")
        mlflow = [
            *(py, "-m", "mlflow", "server", "--host", head, "--port", str(PORTS["mlflow"]), "--workers", "1"),
            *("--backend-store-uri", f"sqlite:///{self.run_dir / HEAD / 'mlflow.db'}"),
            *("--artifacts-destination", f"s3://{self.bucket}/mlflow"),
        ]
        mlflow_env = (
            env
            | DUMMY_S3_KEYS
            | {
                "MLFLOW_S3_ENDPOINT_URL": self.url("s3"),
                "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
            }
        )
        self._start(HEAD, "mlflow", mlflow, mlflow_env, "mlflow.log")
        prefect = [py, "-m", "prefect", "server", "start", "--host", head, "--port", str(PORTS["prefect"])]
        self._start(HEAD, "prefect", [*prefect, "--no-ui"], env, "prefect.log")

    def await_servers(self, timeout_s: float) -> None:
        for name in ("s3", "prefect", "mlflow"):
            processes.wait_until(
                processes.http_ok(self.url(name) + HEALTH[name]),
                what=f"{name} server on {HEAD}",
                timeout_s=timeout_s,
                proc=self.procs[f"{HEAD}/{name}"],
            )

    def start_worker(self, host: str, generation: int = 1) -> Managed:
        """The host's process worker for its pool (a restarted host logs to a new file)."""
        argv = [
            sys.executable,
            "-m",
            "prefect",
            "worker",
            "start",
            "--pool",
            POOLS[host],
            "--type",
            "process",
        ]
        argv += ["--name", f"{host}-{generation}", "--install-policy", "never"]
        return self._start(
            host, f"worker-{generation}", argv, self.worker_env(host), f"worker-{generation}.log"
        )

    def deploy(self, home: Path, timeout_s: float, meanwhile: Callable[[], None]) -> None:
        """`prefect --no-prompt deploy --all` from the checkout, as the operator runs it (its own
        PREFECT_HOME under `home`); `meanwhile` runs while it does."""
        inherited = processes.without_credentials(os.environ)  # `prefect deploy` needs no key
        env = {k: v for k, v in inherited.items() if not k.startswith("PREFECT_")} | self.address_env()
        env["PREFECT_HOME"] = str(home / "prefect")
        deploy = subprocess.Popen(
            [sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--all"],
            cwd=self.project_dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            meanwhile()
            stdout, stderr = deploy.communicate(timeout=timeout_s)
        except BaseException:
            deploy.kill()
            deploy.communicate()
            raise
        if deploy.returncode != 0:
            raise RuntimeError(f"`prefect deploy --all` failed:\n{stdout[-3000:]}\n{stderr[-3000:]}")

    def warm_up_operator(self) -> None:
        """Load what the operator reads with later (MLflow's client and its REST store, the store,
        DuckDB): loaded by a phase's first check instead, it held that phase up to minutes on a
        loaded machine."""
        for module in ("storage.catalog", "storage.sql_views"):
            importlib.import_module(module)
        from mlflow import MlflowClient

        url = self.url("mlflow")
        MlflowClient(tracking_uri=url, registry_uri=url).search_registered_models(max_results=1)

    def logs(self, host: str) -> list[Path]:
        return sorted((self.run_dir / host).glob("*.log"))

    def stop(self, hosts: tuple[str, ...] = HOSTS) -> None:
        """Stop the processes of `hosts` (default: all)."""
        names = [name for name in self.procs if name.split("/")[0] in hosts]
        processes.stop_tree([self.procs[name].pid for name in names], grace_s=5)
        for name in names:
            del self.procs[name]
