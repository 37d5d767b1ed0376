"""Injectors of the integrity probes, shared by tests/reliability and bench/faults.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]  # the checkout: its CLI, not an installed copy


def flip_byte(path: Path, from_end: int = 16) -> None:
    """Invert one byte near the end of `path` (inside the data of a weights file, past its header)."""
    data = bytearray(path.read_bytes())
    data[len(data) - from_end] ^= 0xFF
    path.write_bytes(bytes(data))


@dataclass
class DamageReport:
    attempts: int = 0
    loaded_damaged: int = 0  # a damaged copy that loaded without a word
    unclear: int = 0  # an error other than the named one, or one that suggests unsafe loading
    detail: list[str] = field(default_factory=list)


def policy_damage_probe(work: Path, attempts: int) -> DamageReport:
    """Publish a tiny version, then per attempt: flip a byte of a cached file (must be fetched again
    and load intact), of the stored artifact (must be refused naming the file), and garble heads.pt
    (must be a clean `PolicyFileError`)."""
    import shutil

    from distrl_core.policy import Policy, PolicyConfig, PolicyFileError, load_policy, save_policy
    from storage.policy_manifest import PolicyIntegrityError, file_digest
    from storage.registry import PolicyRegistry, RegistrySettings

    registry = PolicyRegistry(
        RegistrySettings(tracking_uri=f"sqlite:///{work}/mlflow.db", cache_dir=str(work / "cache"))
    )
    saved = save_policy(Policy.create(PolicyConfig(device="cpu")), work / "saved")
    version = registry.publish(saved, run_id=registry.start_run("learner"))
    files = sorted(p.relative_to(saved).as_posix() for p in saved.rglob("*") if p.is_file())
    files.remove("manifest.json")
    report = DamageReport()
    for i in range(attempts):
        name = files[i % len(files)]
        report.attempts += 1
        flip_byte(registry.fetch(version).path / name, from_end=1 + i % 64)
        fetched = registry.fetch(version)
        report.loaded_damaged += file_digest(fetched.path / name) != file_digest(saved / name)
        stored = next((work / "mlartifacts").rglob(name.rsplit("/", 1)[-1]))
        original = stored.read_bytes()
        flip_byte(stored, from_end=1 + i % 64)
        shutil.rmtree(fetched.path)
        report.attempts += 1
        try:
            registry.fetch(version)
            report.loaded_damaged += 1
        except PolicyIntegrityError as exc:
            report.unclear += name not in str(exc) or f"version {version}" not in str(exc)
        stored.write_bytes(original)
    directory = registry.fetch(version).path
    (directory / "heads.pt").write_bytes(b"\x80\x04garbage")
    report.attempts += 1
    try:
        load_policy(directory)
        report.loaded_damaged += 1
    except PolicyFileError as exc:
        report.unclear += "weights_only" in str(exc)
    except Exception as exc:  # the traceback torch gives on its own
        report.unclear += 1
        report.detail.append(type(exc).__name__)
    return report


def damaged_snapshots(good: bytes) -> dict[str, bytes]:
    """Damaged versions of a good priority snapshot, by kind."""
    import io

    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(good))
    meta = table.schema.metadata or {}

    def parquet(t) -> bytes:
        sink = io.BytesIO()
        pq.write_table(t, sink)
        return sink.getvalue()

    return {
        "truncated": good[: len(good) // 2],
        "garbage": bytes(range(256)) * 8,
        "empty": b"",
        "missing_column": parquet(table.drop_columns(["priority"])),
        "non_numeric_version": parquet(table.replace_schema_metadata(meta | {b"policy_version": b"v7"})),
        "huge_sampled_steps": parquet(
            table.replace_schema_metadata(meta | {b"sampled_steps": b"10" + b"0" * 15})
        ),
    }


def snapshot_damage_probe(store, rounds: int = 1) -> tuple[int, int, int]:
    """Per round and damage kind: checkpoint, damage, restart. Returns (attempts, crashed: a replay
    that did not start or sample, corrupt: a damaged file left in place or restored from)."""
    import numpy as np

    from storage.replay import Replay
    from storage.replay_config import ReplaySettings
    from storage.store import atomic_put
    from storage.synthetic import write_synthetic_episodes as fill

    settings = ReplaySettings(min_size_steps=1, samples_per_insert=4.0, learner_id="probe")
    fill(store, 12)
    attempts = crashed = corrupt = 0
    for _ in range(rounds):
        first = Replay(store, settings)
        first.ingest()
        first.update_priorities(first.sample(4).slots, np.full(4, 9.0))
        first.checkpoint()
        first.close()
        with store.fs.open(first.snapshot_path, "rb") as fh:
            good = fh.read()
        for payload in damaged_snapshots(good).values():
            attempts += 1
            atomic_put(store, first.snapshot_path, payload)
            try:
                replay = Replay(store, settings)
                replay.ingest()
                corrupt += store.fs.exists(first.snapshot_path) or replay.limiter.sampled != 0
                replay.sample(4)
                replay.close()
            except Exception:
                crashed += 1
            atomic_put(store, first.snapshot_path, good)
    return attempts, crashed, corrupt


class SmallDisk:
    """A real 2 MiB tmpfs (needs root: `mount` fails otherwise and the caller skips) that can be
    filled to ENOSPC and freed again."""

    def __init__(self, where: Path, size: str = "2m") -> None:
        import subprocess

        self.path = where
        where.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise PermissionError(
                f"cannot mount a tmpfs at {where}: {done.stderr.strip() or done.returncode}"
            )
        self.filler = where / "filler"

    def fill(self) -> None:
        """Take every free byte (the next write fails with ENOSPC)."""
        import errno

        with open(self.filler, "ab", buffering=0) as fh:  # unbuffered: closing has nothing left to write
            try:
                while True:
                    fh.write(b"\0" * 512)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def unmount(self) -> None:
        import subprocess

        subprocess.run(["umount", "-l", str(self.path)], capture_output=True)


def disk_full_probe(disk: SmallDisk, episodes: int) -> tuple[int, int, int]:
    """A shard writer on a full tmpfs: `episodes` handed over, then space freed and the buffer
    flushed. Returns (acknowledged, lost, crashed: add_episode calls that raised)."""
    import numpy as np

    from storage.catalog import list_shards, read_shard
    from storage.shards import ShardWriter, ShardWriterConfig
    from storage.store import open_store
    from storage.synthetic import synthetic_episode

    store = open_store(str(disk.path / "store"))
    config = ShardWriterConfig(
        pool="p", collector_id="c0", flush_episodes=4, flush_seconds=0, retry_seconds=0
    )
    writer = ShardWriter(store, config)
    rng = np.random.default_rng(0)
    acked, crashed = [], 0
    disk.fill()
    for _ in range(episodes):
        episode = synthetic_episode(rng)
        try:
            writer.add_episode(episode)
            acked.append(episode.column("episode_id")[0].as_py())
        except Exception:
            crashed += 1
    disk.free()
    writer.close()
    stored = set()
    for shard in list_shards(store):
        stored |= set(read_shard(store, shard.path).column("episode_id").to_pylist())
    return len(acked), len(set(acked) - stored), crashed


def start_train_local(home: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    for key in [k for k in env if k.startswith(("DISTRL_", "PREFECT_", "MLFLOW_"))]:
        del env[key]
    argv = [sys.executable, "-m", "ops.cli", "-v", "train-local", "--home", str(home)]
    argv += ["--minutes", "3", "--collectors", "1", "--warm-start-updates", "0"]
    log = open(home.parent / "train-local.log", "wb")  # noqa: SIM115  (the child writes it)
    return subprocess.Popen(argv, cwd=home.parent, env=env, stdout=log, stderr=subprocess.STDOUT)


def wait_for(check, what: str, proc: subprocess.Popen, bound_s: float = 400) -> None:
    deadline = time.monotonic() + bound_s
    while not check():
        assert proc.poll() is None, f"train-local exited ({proc.returncode}) before {what}"
        assert time.monotonic() < deadline, f"no {what} within {bound_s:.0f} s"
        time.sleep(1)


def stored_shards(home: Path) -> list[Path]:
    return list((home / "store").rglob("*.parquet"))


def process_runs(home: Path) -> list:
    """The runs of processes (not the learning curve, which every evaluation appends to)."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("distrl")
    runs = client.search_runs([experiment.experiment_id]) if experiment else []
    return [r for r in runs if r.data.tags.get("role") != "learning_curve"]


def train_local_log(home: Path) -> str:
    return (home.parent / "train-local.log").read_text(errors="replace")[-6000:]


def sigterm_probe(work: Path) -> tuple[int, int, int]:
    """`distrl train-local` stopped by SIGTERM once it has written a shard. Returns (exit code,
    runs left RUNNING, shards stored)."""
    import signal

    home = work / "home"
    proc = start_train_local(home)
    try:
        wait_for(lambda: len(stored_shards(home)) > 0, "shard", proc)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    running = sum(r.info.status == "RUNNING" for r in process_runs(home))
    return code, running, len(stored_shards(home))
