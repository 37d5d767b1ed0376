"""A multi-host run on one machine, with real networking: `sudo .venv/bin/python -m bench.multihost`.

Four hosts, each a network namespace on a private bridge (`bench/netns.py`, 10.77.0.0/24): `head`
(Prefect server, MLflow server, S3 endpoint: moto), `collector-a` and `collector-b` (a process worker
each, pools collectors-a / collectors-b), `learner` (pool learner-gpu). This process is the
operator's laptop on the same bridge: it creates the work pools, runs `prefect deploy --all`, starts
the deployments of prefect.yaml and reads the results back. Every host knows the others only by
address (`bench/_multihost_hosts.py`). Then, in order:

1. power cut: every process of collector-a gets SIGKILL at once, once both collectors have written
   shards and the learner has published version 2. Every shard collector-a had reported as written
   must be readable; the learner must publish new versions from collector-b's data;
2. collector-a comes back: a new worker, the lost run marked Crashed (what Prefect's own zombie
   detection would do; it frees the deployment's concurrency slot), a new run; it must write shards;
3. the head's cable is pulled for `cut_seconds` (`ip link set <veth> down`, then up): the runs must
   carry on, and afterwards new versions and new shards from both collectors must appear. What each
   host logged while the head was away is part of the result;
4. the collector and learner hosts are stopped (what needed them running is checked), then
   episodes, versions and shards per host are read back with `distrl sql`'s views (`shards`,
   `episodes`) from the store at rest.

Needs root (network namespaces); writes bench/results/multihost.json. tests/integration/test_multihost.py
runs the same scenario.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._common import RESULTS, machine
from bench._multihost_hosts import (
    COLLECTOR_A,
    COLLECTOR_B,
    DEPLOYMENTS,
    HEAD,
    HOSTS,
    LEARNER,
    PORTS,
    Hosts,
)
from bench._multihost_observe import WROTE_SHARD, log_window, shard_rows, tcp_to
from bench.netns import Network
from ops.cli_flows import environment_kept

REPO = Path(__file__).resolve().parents[1]
# How often `Scenario.wait_for` checks (log files, one MLflow search): every phase ends in such a
# wait, and at 2 s each gave away ~1 s on average.
POLL_S = 0.5

# Training starts at ~2 shards (one per collector, ~35 steps each): version 2 then comes as soon as
# the collectors have written their first shards, which the first phase waits for anyway.
LEARNER_PARAMS: dict[str, Any] = {
    "params": {"batch_size": 4, "updates_per_block": 4, "publish_every_updates": 4, "max_minutes": 30.0},
    "replay": {"min_size_steps": 64},
    "warm_start": {"family": "general", "updates": 5},
}
# Emulator-like step latency: the collectors sleep rather than spin, so three hosts share two cores.
# A batch is one episode per environment (num_envs 4) and a shard is one batch: every phase waits
# for a shard, and a batch of 8 took two rounds of the environments (~10-20 s on a loaded machine).
COLLECTOR_PARAMS: dict[str, Any] = {
    "episodes_per_batch": 4,
    "flush_episodes": 4,
    "flush_seconds": 5.0,
    "step_latency_s": 0.1,
    "task_run_seconds": 10.0,
    "max_minutes": 30.0,
}


@dataclass
class ScenarioConfig:
    run_dir: Path
    project_dir: Path = REPO
    subnet: str | None = None
    """None: the first free /24 of 10.77.0.0/16 (see `bench.netns`)."""
    cut_seconds: float = 30.0
    startup_timeout_s: float = 300.0
    phase_timeout_s: float = 300.0


@dataclass
class Scenario:
    config: ScenarioConfig
    timeline: list[tuple[float, str]] = field(default_factory=list)
    result: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.net = Network(HOSTS, self.config.subnet)
        self.hosts = Hosts(self.net, self.config.run_dir, self.config.project_dir)
        self.started = time.monotonic()
        self.runs: dict[str, Any] = {}

    # ----- helpers ---------------------------------------------------------------------------------
    def mark(self, what: str) -> float:
        now = time.monotonic() - self.started
        self.timeline.append((round(now, 1), what))
        print(f"[{now:6.1f} s] {what}", flush=True)
        return now

    @contextlib.contextmanager
    def operator_env(self) -> Iterator[None]:
        """This process as the operator's laptop: the same addresses as every host."""
        with environment_kept():
            os.environ.update(self.hosts.address_env())
            os.environ["DISTRL_MLFLOW_CACHE_DIR"] = str(self.config.run_dir / "operator" / "policy-cache")
            yield

    @contextlib.contextmanager
    def api(self) -> Iterator[Any]:
        from prefect.client.orchestration import get_client
        from prefect.settings import PREFECT_API_URL, PREFECT_CLIENT_MAX_RETRIES, temporary_settings

        url = self.hosts.address_env()["PREFECT_API_URL"]
        settings = {PREFECT_API_URL: url, PREFECT_CLIENT_MAX_RETRIES: 8}
        with temporary_settings(settings), get_client(sync_client=True) as client:
            yield client

    def wait_for(self, what: str, check: Callable[[], bool], timeout_s: float | None = None) -> float:
        deadline = time.monotonic() + (timeout_s or self.config.phase_timeout_s)
        while True:
            with contextlib.suppress(Exception):
                if check():
                    return self.mark(what)
            dead = [n for n, p in self.hosts.procs.items() if not p.alive() and "/worker" not in n]
            if dead:
                raise RuntimeError(f"{dead} exited while waiting for: {what}\n{self.tails()}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"not within {timeout_s or self.config.phase_timeout_s:.0f} s: {what}\n"
                    f"{self.progress()}\n{self.tails()}"
                )
            time.sleep(POLL_S)

    def progress(self) -> str:
        """Where each host stands, first in a timeout's message (its tails may be cut short)."""
        parts = [
            f"{host}: {len(self.shards_logged(host))} shards logged" for host in (COLLECTOR_A, COLLECTOR_B)
        ]
        with contextlib.suppress(Exception):
            parts.append(f"{len(self.versions())} versions published")
        with contextlib.suppress(Exception):
            parts += [f"{host}'s run {state}" for host, state in self.run_states().items()]
        return "progress: " + "; ".join(parts)

    def tails(self) -> str:
        # The hosts' workers first, the head's servers last and shorter: a long message is cut in
        # its middle when shown, and a stalled phase is read in the workers' logs.
        procs = sorted(self.hosts.procs.items(), key=lambda item: item[0].startswith(f"{HEAD}/"))
        return "\n".join(f"--- {n} ---\n{p.tail(8 if n.startswith(f'{HEAD}/') else 15)}" for n, p in procs)

    def shards_logged(self, host: str, log: str | None = None) -> list[str]:
        """Shards the host's collector reported as written (its worker's log), in order."""
        paths = [self.config.run_dir / host / log] if log else self.hosts.logs(host)
        found = []
        for path in paths:
            with contextlib.suppress(OSError):
                found += WROTE_SHARD.findall(path.read_text(errors="replace"))
        return found

    def versions(self) -> list[tuple[int, float]]:
        """(version, creation time as epoch seconds) of every published version."""
        from storage.registry import PolicyRegistry

        registry = PolicyRegistry()
        found = registry.client.search_model_versions(f"name='{registry.name}'")
        return sorted((int(v.version), v.creation_timestamp / 1000) for v in found)

    def run_deployment(self, host: str, parameters: dict[str, Any]) -> str:
        with self.api() as client:
            deployment = client.read_deployment_by_name(DEPLOYMENTS[host])
            merged = dict(deployment.parameters)
            for key, value in parameters.items():
                current = merged.get(key)
                merged[key] = (
                    current | value if isinstance(current, dict) and isinstance(value, dict) else value
                )
            run = client.create_flow_run_from_deployment(deployment.id, parameters=merged)
        self.runs[host] = run.id
        return str(run.id)

    def run_states(self) -> dict[str, str]:
        with self.api() as client:
            return {host: client.read_flow_run(run_id).state_name for host, run_id in self.runs.items()}

    def connections_to_head(self, host: str) -> dict[str, dict[str, int]]:
        return tcp_to(self.net.output(host, ["ss", "-tnH"]), self.net.hosts[HEAD].address, PORTS)

    def log_sizes(self) -> dict[Path, int]:
        return {p: p.stat().st_size for host in HOSTS for p in self.hosts.logs(host)}

    # ----- the scenario ----------------------------------------------------------------------------
    def setup(self) -> None:
        from ops.up_config import work_pools

        self.net.up()
        self.mark(f"network up: {', '.join(f'{h.name} {h.address}' for h in self.net.hosts.values())}")
        self.hosts.start_servers()
        self.hosts.await_servers(self.config.startup_timeout_s)
        self.mark("head: S3, MLflow and Prefect answer on the bridge")
        import boto3
        from prefect.client.schemas.actions import WorkPoolCreate
        from prefect.workers.process import ProcessWorker

        env = self.hosts.address_env()
        s3 = boto3.client(
            "s3",
            endpoint_url=env["DISTRL_S3_ENDPOINT_URL"],
            region_name="us-east-1",
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        )
        s3.create_bucket(Bucket=self.hosts.bucket)
        template = ProcessWorker.get_default_base_job_template()
        with self.api() as client:
            for pool in work_pools(self.config.project_dir):
                client.create_work_pool(
                    WorkPoolCreate(name=pool, type="process", base_job_template=template), overwrite=True
                )
        # The workers need only their pools: their start-up (seconds of imports each) overlaps the deploy.
        for host in (COLLECTOR_A, COLLECTOR_B, LEARNER):
            self.hosts.start_worker(host)
        self.hosts.deploy(
            self.config.run_dir / "operator", self.config.startup_timeout_s, self.hosts.warm_up_operator
        )
        self.mark("operator: work pools created, workers starting, `prefect deploy --all` done")

        def online() -> bool:
            with self.api() as client:
                return all(
                    client.read_workers_for_work_pool(p)
                    for p in ("collectors-a", "collectors-b", "learner-gpu")
                )

        self.wait_for(
            "workers of collector-a, collector-b and learner online", online, self.config.startup_timeout_s
        )

    def power_cut(self) -> None:
        self.run_deployment(LEARNER, LEARNER_PARAMS)
        for host in (COLLECTOR_A, COLLECTOR_B):
            self.run_deployment(host, {"params": COLLECTOR_PARAMS})
        self.mark("operator: learn, collect-pool-a and collect-pool-b started")
        self.wait_for(
            "both collectors wrote shards and the learner published version 2",
            lambda: (
                bool(self.shards_logged(COLLECTOR_A))
                and bool(self.shards_logged(COLLECTOR_B))
                and len(self.versions()) >= 2
            ),
        )
        killed = self.net.power_off(COLLECTOR_A)
        acknowledged = self.shards_logged(COLLECTOR_A)
        versions, b_before = len(self.versions()), len(self.shards_logged(COLLECTOR_B))
        self.mark(
            f"power cut on collector-a: SIGKILL to {len(killed)} processes; it had reported {len(acknowledged)} shards"
        )
        self.result["power_cut"] = {
            "killed_processes": len(killed),
            "acknowledged_shards": acknowledged,
            "versions_at_cut": versions,
        }
        self.wait_for(
            "learner published a new version and collector-b wrote new shards after the power cut",
            lambda: len(self.versions()) > versions and len(self.shards_logged(COLLECTOR_B)) > b_before,
        )
        self.result["power_cut"]["versions_after"] = len(self.versions())

    def check_acknowledged(self) -> int:
        """Read back every shard collector-a reported before its power cut."""
        rows = shard_rows(self.result["power_cut"]["acknowledged_shards"])
        self.result["power_cut"]["readable_shards"] = sum(1 for n in rows if n)
        return int(self.result["power_cut"]["readable_shards"])

    def rejoin(self) -> None:
        from prefect.states import Crashed

        lost = self.runs[COLLECTOR_A]
        with self.api() as client:
            lost_state = client.read_flow_run(lost).state_name
            client.set_flow_run_state(lost, Crashed(message="collector-a lost power"), force=True)
        self.hosts.start_worker(COLLECTOR_A, generation=2)
        self.run_deployment(COLLECTOR_A, {"params": COLLECTOR_PARAMS})
        self.mark(f"collector-a restarted: lost run was {lost_state!r}, marked Crashed; new run started")
        # While the new worker and its flow run start up (tens of seconds), not before.
        readable = self.check_acknowledged()
        self.mark(f"collector-a's acknowledged shards read back: {readable} readable")
        self.wait_for(
            "collector-a's new run wrote a shard",
            lambda: bool(self.shards_logged(COLLECTOR_A, "worker-2.log")),
        )
        self.result["rejoin"] = {
            "lost_run_state_seen": lost_state,
            "shards_after_restart": len(self.shards_logged(COLLECTOR_A, "worker-2.log")),
        }

    def cut_head(self) -> None:
        before = self.log_sizes()
        shards = {h: len(self.shards_logged(h)) for h in (COLLECTOR_A, COLLECTOR_B)}
        self.net.pull_cable(HEAD)
        cut_at = self.mark(f"head's cable pulled for {self.config.cut_seconds:.0f} s")
        time.sleep(self.config.cut_seconds / 2)
        # Mid-cut: on each host, its TCP connections to the head's servers, and how many hold
        # request bytes the head has not acknowledged (a call blocked, being retransmitted).
        # The three hosts at once, then what is left of the cut: their `ss` can take 15-30 s on a
        # loaded machine, which a fixed second half of the cut added to it (47 s instead of 30).
        readers = (COLLECTOR_A, COLLECTOR_B, LEARNER)
        with ThreadPoolExecutor(max_workers=len(readers)) as pool:
            waiting = dict(zip(readers, pool.map(self.connections_to_head, readers), strict=True))
        time.sleep(max(0.0, cut_at + self.config.cut_seconds - (time.monotonic() - self.started)))
        self.net.plug_cable(HEAD)
        plugged_wall, plugged_at = time.time(), self.mark("head's cable plugged back")
        during = self.log_sizes()
        self.wait_for(
            "after the cut: a new version and new shards from both collectors",
            lambda: (
                any(t > plugged_wall for _, t in self.versions())
                and all(len(self.shards_logged(h)) > shards[h] for h in shards)
            ),
        )
        after = self.log_sizes()
        self.result["head_cut"] = {
            "seconds": round(plugged_at - cut_at, 1),
            "connections_mid_cut": waiting,
            "while_down": log_window(before, during, self.config.run_dir),
            "after_plug": log_window(during, after, self.config.run_dir),
            "run_states_after": self.run_states(),
        }

    def report(self) -> None:
        # The runs' part is checked: stopped, they no longer take the cores from moto and DuckDB (with
        # them running, this read took 245 s once on a loaded machine), nor add shards meanwhile.
        self.hosts.stop(hosts=(COLLECTOR_A, COLLECTOR_B, LEARNER))
        self.mark("collector and learner hosts stopped")
        from storage.sql_views import open_sql
        from storage.store import open_store

        session = open_sql(open_store())
        try:
            per_host = session.query(
                "SELECT host, count(*) AS shards, sum(episodes)::BIGINT AS episodes, sum(steps)::BIGINT AS steps, "
                "list_sort(list_distinct(flatten(list(policy_versions)))) AS policy_versions "
                "FROM shards GROUP BY host ORDER BY host"
            ).to_pylist()
            episodes = session.query(
                "SELECT pool, collector_id, count(*) AS episodes, count(DISTINCT policy_version) AS versions, "
                "avg(success) AS success FROM episodes GROUP BY ALL ORDER BY ALL"
            ).to_pylist()
            acknowledged = set(self.result["power_cut"]["acknowledged_shards"])
            listed = session.query("SELECT shard, host FROM shards").to_pylist()
        finally:
            session.close()
        self.result["sql"] = {"per_host": per_host, "per_collector": episodes}
        self.result["power_cut"]["acknowledged_in_sql"] = sum(
            1 for row in listed if row["shard"] in acknowledged and row["host"] == COLLECTOR_A
        )
        self.result["versions"] = [v for v, _ in self.versions()]
        self.mark("report read back with SQL")

    def run(self) -> dict[str, Any]:
        try:
            self.setup()
            with self.operator_env():
                self.power_cut()
                self.rejoin()
                self.cut_head()
                self.report()
        finally:
            self.hosts.stop()
            self.net.down()
            self.mark("hosts stopped, namespaces and links removed")
        self.result["timeline"] = self.timeline
        self.result["total_s"] = round(time.monotonic() - self.started, 1)
        return self.result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path(".distrl/bench/multihost"))
    parser.add_argument(
        "--subnet", default=None, help="a /24 for the hosts (default: a free one of 10.77.0.0/16)"
    )
    parser.add_argument("--cut-seconds", type=float, default=30.0)
    parser.add_argument("--out", type=Path, default=RESULTS / "multihost.json")
    args = parser.parse_args(argv)
    from bench.netns import unavailable

    reason = unavailable()
    if reason:
        print(f"error: {reason}", file=sys.stderr)
        return 2
    import shutil

    # `timeout` or a container stop sends SIGTERM: unwind, so `finally` removes the namespaces.
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    shutil.rmtree(args.dir, ignore_errors=True)
    config = ScenarioConfig(run_dir=args.dir.resolve(), subnet=args.subnet, cut_seconds=args.cut_seconds)
    result = Scenario(config).run()
    result["machine"] = machine()
    args.out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(json.dumps({k: result[k] for k in ("sql", "total_s")}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
