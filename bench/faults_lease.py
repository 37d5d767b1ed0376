"""Fault scenarios of two learners at once and of `distrl up`'s children, at benchmark counts
(tests/reliability/test_replay_lease.py, test_two_learners.py, test_first_start.py and
tests/integration/test_deployments.py (the canaries) run the same at small counts). bench/faults.py merges `SCENARIOS` into its
table; each needs the S3 variables bench/faults.py sets (moto) and returns its `row`:

- two learners at once: pairs started together, of one replay (the lease refuses the second) or
  of two (the registry refuses the second child of one parent), each publishing a child of the
  newest version; corrupt: a parent with children from two runs; crashed: any error but a
  refusal; leaked: lease files left; lost: pairs where nobody published;
- a stale lease: its holder stops renewing; lost: heirs that did not take over; corrupt: old
  holders that did not find out;
- first starts: pairs of `distrl retrain` on a fresh home; crashed: either failing other than by
  the empty registry's one-line error;
- `distrl up` children: canaries of every kind in the environment; leaked: canaries found in any
  child's /proc/<pid>/environ; crashed: a stack that did not start.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

from bench.faults_env import row
from storage.lease import Holder, LeaseHeld, LeaseLost, LeaseSettings, ReplayLease
from storage.store import Store, open_store

ROOT = Path(__file__).resolve().parents[1]
# Every kind of secret that reached `distrl up`'s children through a denylist, and names nobody knows.
CANARIES = {
    "HF_TOKEN": "hf_canaryTokenHuggingFace8c1d",
    "GITHUB_TOKEN": "ghp_canaryGithubToken5e2f",
    "MLFLOW_TRACKING_PASSWORD": "mlflow-canary-password-91a0",
    "MLFLOW_TRACKING_TOKEN": "mlflow-canary-token-77b3",
    "PREFECT_API_KEY": "pnu_canaryPrefectKey3d4e",
    "PREFECT_API_AUTH_STRING": "admin:prefect-canary-auth-6f7a",
    "AWS_ACCESS_KEY": "AKIACANARYLEGACY0001",
    "AWS_SECRET_KEY": "legacy-secret-canary-2b9c",
    "MLFLOW_TRACKING_URI": "https://team:uri-canary-password-4c5d@mlflow.example.com",
    "DISTRL_JUDGE_BASE_URL": "https://judge:judge-url-canary-0e1f@judge.example.com/v1",
    "XQ7_SOMETHING_UNKNOWN": "unknown-variable-canary-a8b9",
    "DISTRL_NOT_A_SETTING": "unknown-distrl-canary-c6d7",
}
# The passwords inside the URLs and the auth string, found even if the rest were rewritten.
CANARY_PARTS = ("uri-canary-password-4c5d", "judge-url-canary-0e1f", "prefect-canary-auth")
PAIRS = 10
FIRST_START_PAIRS = 2


def _store(kind: str, work: Path) -> Store:
    if kind == "local":
        return open_store(str(work / f"store-{uuid.uuid4().hex[:8]}"))
    import boto3

    bucket = f"learners-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=bucket)
    return open_store(f"s3://{bucket}/runs/faults")


def _two_learners(kind: str) -> Callable[[], dict]:
    def two_learners_one_replay() -> dict:
        from storage.registry import PolicyRegistry, RegistrySettings

        with tempfile.TemporaryDirectory(prefix="distrl-learners-") as tmp:
            work = Path(tmp)
            store = _store(kind, work)
            registry = PolicyRegistry(
                RegistrySettings(
                    tracking_uri=f"sqlite:///{work / 'mlflow.db'}", cache_dir=str(work / "cache")
                )
            )
            policy = work / "policy"
            policy.mkdir()
            (policy / "weights.bin").write_bytes(os.urandom(64))
            registry.publish(policy, run_id=registry.start_run("warm start"), tags={})
            crashed = lost = 0
            for pair in range(PAIRS):
                # Odd pairs: two replays (a `learn` and a `retrain`), only the registry's check between them.
                published, errors = _race(registry, store, policy, f"replay{pair}", shared=pair % 2 == 0)
                crashed += len(errors)
                lost += not published
            children: dict[str, set[str]] = {}
            for version in registry.versions():
                tags = registry.tags(version)
                if "parent_version" in tags:
                    children.setdefault(tags["parent_version"], set()).add(tags["run_id"])
            corrupt = sum(len(runs) > 1 for runs in children.values())
            leases = store.fs.glob(store.path("replay", "*", "lease.json"))
        return row(
            f"two_learners_one_replay_{kind}",
            PAIRS,
            corrupt=corrupt,
            lost=lost,
            crashed=crashed,
            leaked=len(leases),
            detail=f"{len(registry.versions()) - 1} versions published by {2 * PAIRS} learners",
        )

    two_learners_one_replay.__name__ = f"two_learners_one_replay_{kind}"
    return two_learners_one_replay


def _race(
    registry, store: Store, policy: Path, learner_id: str, *, shared: bool
) -> tuple[list[int], list[BaseException]]:
    """Two learners started together, of one replay (`shared`) or two, both training from the
    newest version: the versions they published, and their errors."""
    from storage.registry import SiblingPublished

    gate, published, errors = threading.Barrier(2), [], []

    def learner(i: int) -> None:
        gate.wait()
        run_id = registry.start_run(f"{learner_id}-{i}")
        replay = learner_id if shared else f"{learner_id}-{i}"
        lease = ReplayLease(store, replay, Holder.this_process(run_id), LeaseSettings(wait_s=0))
        try:
            with lease:
                start = registry.resolve("latest")
                tags = {"parent_version": start}
                published.append(registry.publish(policy, run_id=run_id, tags=tags, siblings_after=start))
        except (LeaseHeld, SiblingPublished):
            pass  # the refusal this scenario wants
        except BaseException as exc:  # counted as a crash, not raised
            errors.append(exc)

    threads = [threading.Thread(target=learner, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return published, errors


def _stale_lease(kind: str) -> Callable[[], dict]:
    def stale_lease_takeover() -> dict:
        lost = corrupt = 0
        with tempfile.TemporaryDirectory(prefix="distrl-stale-") as tmp:
            store = _store(kind, Path(tmp))
            for attempt in range(PAIRS):
                dead = ReplayLease(
                    store, f"r{attempt}", Holder("killed", 1, "dead"), LeaseSettings(ttl_s=0.3)
                )
                dead.acquire()
                dead._stop.set()  # killed: no more renewals
                heir = ReplayLease(store, f"r{attempt}", Holder("heir", 2, "heir"), LeaseSettings(wait_s=10))
                try:
                    heir.acquire()
                except LeaseHeld:
                    lost += 1
                    continue
                try:
                    dead.check()
                    corrupt += 1
                except LeaseLost:
                    pass
                heir.release()
        return row(f"stale_lease_takeover_{kind}", PAIRS, corrupt=corrupt, lost=lost)

    stale_lease_takeover.__name__ = f"stale_lease_takeover_{kind}"
    return stale_lease_takeover


def first_start_race_home() -> dict:
    crashed = 0
    argv = [sys.executable, "-m", "ops.cli", "retrain", "--updates", "1"]
    env = {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", ""), "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory(prefix="distrl-first-") as tmp:
        for pair in range(FIRST_START_PAIRS):
            home = Path(tmp) / f"home{pair}"
            procs = [
                subprocess.Popen(
                    [*argv, "--home", str(home)],
                    cwd=tmp,
                    env=env | {"HOME": tmp},
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
                for _ in range(2)
            ]
            for proc in procs:
                out = proc.communicate(timeout=900)[0].strip().splitlines()
                crashed += proc.returncode != 2 or not out[-1].startswith("error: no policy version")
    return row("first_start_race_home", 2 * FIRST_START_PAIRS, crashed=crashed)


def secret_canaries_up_children() -> dict:
    import psutil

    from ops.up import Stack, UpConfig

    saved = dict(os.environ)
    os.environ.update(CANARIES)
    leaked = crashed = checked = 0
    try:
        with tempfile.TemporaryDirectory(prefix="distrl-up-") as tmp:
            config = UpConfig(run_dir=Path(tmp) / "up", project_dir=ROOT, ui=False, evaluator=False)
            with Stack(config) as stack:
                for proc in stack.procs.values():
                    for member in [
                        psutil.Process(proc.pid),
                        *psutil.Process(proc.pid).children(recursive=True),
                    ]:
                        text = Path(f"/proc/{member.pid}/environ").read_bytes().decode(errors="replace")
                        checked += 1
                        leaked += sum(value in text for value in (*CANARIES.values(), *CANARY_PARTS))
    except Exception:  # a stack that does not start is the row's `crashed`
        crashed = 1
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return row(
        "secret_canaries_up_children",
        checked * len(CANARIES),
        crashed=crashed,
        leaked=leaked,
        detail=f"{len(CANARIES)} canaries x {checked} processes",
    )


SCENARIOS: list[Callable[[], dict]] = [
    _two_learners("local"),
    _two_learners("s3"),
    _stale_lease("local"),
    _stale_lease("s3"),
    first_start_race_home,
    secret_canaries_up_children,
]
