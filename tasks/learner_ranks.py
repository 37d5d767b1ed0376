"""The learner on several processes (`LearnerParams.learner_processes` > 1).

The `learn` flow's own process is rank 0: it keeps everything that does I/O (the DuckDB replay, the
ingest, the MLflow run, the registry) and runs the flow's tasks as on one process. `torchrun`
(`python -m torch.distributed.run`) starts the W - 1 follower ranks on this machine; they join the
process group through a TCPStore that rank 0 serves. For each update rank 0 puts the union batch it
drew (with its policy version and update count) in the store; every rank trains on its shard of
it (`distrl_core/learner/distributed.py`, where DDP all-reduces the gradients), and rank 0 writes
the priorities of the whole batch back and publishes. Followers never open the replay, MLflow or
the registry: their weights come from rank 0 (the version it resumed from, as files in the store).

    ranks = LearnerRanks.start(learner, 2)
    step = train_step(learner, ranks.sharing(sample, learner), replay.update_priorities)
    ranks.close()
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import pickle
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from distrl_core.learner.config import LearnerConfig
from distrl_core.learner.distributed import DataParallel
from distrl_core.learner.learner import Learner
from distrl_core.learner.step import Draw, train_step
from distrl_core.policy import load_policy, save_policy
from distrl_core.policy.defaults import configure_threads

log = logging.getLogger(__name__)

JOIN_TIMEOUT_S = 300.0  # followers import torch and load the policy (a pretrained base: minutes)
STOP_TIMEOUT_S = 60.0
COLLECTIVE_TIMEOUT = timedelta(minutes=10)  # one update's all-reduce; followers idle in the store
PROJECT_ROOT = Path(__file__).resolve().parent.parent


class LearnerRanks:
    """Rank 0's side: the torchrun process, the store it serves and the command count."""

    def __init__(self, process: subprocess.Popen[bytes], store: dist.TCPStore, learner: Learner) -> None:
        self.process = process
        self.store = store
        self.learner = learner
        self.commands = 0

    @classmethod
    def start(cls, learner: Learner, world: int) -> LearnerRanks:
        """Launch `world - 1` followers with torchrun, wait until they joined, and make `learner`
        train on rank 0's shard (`Learner.parallel`)."""
        store = dist.TCPStore(
            "127.0.0.1", _free_port(), is_master=True, wait_for_workers=False, timeout=COLLECTIVE_TIMEOUT
        )
        _put(store, "init", pickle.dumps(_init_message(learner)))
        command = [
            sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world - 1}",
            "-m", "tasks.learner_ranks", f"--rank0=127.0.0.1:{store.port}", f"--world={world}",
        ]  # fmt: skip
        env = os.environ | {
            "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))
        }
        process = subprocess.Popen(command, cwd=PROJECT_ROOT, env=env)
        log.info("torchrun started %d follower learner rank(s) (pid %d)", world - 1, process.pid)
        try:
            _wait_for_followers(store, process, world - 1)
            _init_group(learner.device, 0, world, store)
            learner.parallel = DataParallel(learner.policy, 0, world)
        except BaseException:
            _stop(process)
            raise
        return cls(process, store, learner)

    def sharing(self, sample: Callable[[], Draw]) -> Callable[[], Draw]:
        """`sample`, then the draw sent to the followers (a replay not ready sends nothing)."""

        def draw() -> Draw:
            batch = sample()
            self._send(("update", batch, self.learner.policy_version, self.learner.updates))
            return batch

        return draw

    def close(self) -> None:
        """Stop the followers (they leave after their last update) and the process group."""
        try:
            if self.process.poll() is None:
                self._send(("stop",))
            _stop(self.process)
        finally:
            self.learner.parallel = None
            if dist.is_initialized():
                dist.destroy_process_group()

    def _send(self, message: tuple[Any, ...]) -> None:
        _put(self.store, f"cmd/{self.commands}", pickle.dumps(message))
        if self.commands:  # every follower read it: it took part in that update's all-reduce
            self.store.delete_key(f"cmd/{self.commands - 1}")
        self.commands += 1


def _put(store: dist.Store, key: str, value: bytes) -> None:
    store.set(key, value)  # type: ignore[arg-type]  # the binding takes bytes; its stub says str only


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _init_message(learner: Learner) -> dict[str, Any]:
    """What a follower builds its learner from: rank 0's version files (a tar) and config."""
    buffer = io.BytesIO()
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(fileobj=buffer, mode="w") as tar:
        save_policy(learner.policy, Path(tmp) / "policy")
        tar.add(Path(tmp) / "policy", arcname="policy")
    return {"policy": buffer.getvalue(), "config": learner.config.to_dict(), "device": learner.device.type}


def _wait_for_followers(store: dist.TCPStore, process: subprocess.Popen[bytes], followers: int) -> None:
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    while store.add("ready", 0) < followers:
        if process.poll() is not None:
            raise RuntimeError(
                f"torchrun exited with code {process.returncode} before its {followers} learner rank(s) "
                "joined (its output is above); with learner_processes=1 the learner runs in this process"
            )
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"the {followers} follower learner rank(s) did not join within {JOIN_TIMEOUT_S:.0f} s"
            )
        time.sleep(0.2)


def _init_group(device: torch.device, rank: int, world: int, store: dist.Store) -> None:
    backend = "nccl" if device.type == "cuda" else "gloo"
    group_store = dist.PrefixStore("group", store)
    dist.init_process_group(
        backend, store=group_store, rank=rank, world_size=world, timeout=COLLECTIVE_TIMEOUT
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        log.warning("torchrun did not stop within %.0f s; terminating it", STOP_TIMEOUT_S)
        process.terminate()
        process.wait(timeout=STOP_TIMEOUT_S)


# ----- the follower ranks (run by torchrun) -----------------------------------------------------------


def follow(rank0: str, world: int) -> int:
    """A follower's life: build the learner from rank 0's files, join, train on each draw rank 0
    sends until it says stop (or its store goes away: rank 0 ended). Returns the updates made."""
    rank = int(os.environ["RANK"]) + 1  # torchrun numbers its own processes from 0; 0 is the flow's
    host, port = rank0.rsplit(":", 1)
    store = dist.TCPStore(host, int(port), is_master=False, timeout=COLLECTIVE_TIMEOUT)
    learner = _follower_learner(pickle.loads(store.get("init")), rank)
    store.add("ready", 1)
    _init_group(learner.device, rank, world, store)
    learner.parallel = DataParallel(learner.policy, rank, world)
    updates = 0
    try:
        while (message := pickle.loads(_next_command(store, updates)))[0] == "update":
            _, draw, learner.policy_version, learner.updates = message
            train_step(learner, partial(_given, draw), _discard)
            updates += 1
    finally:
        dist.destroy_process_group()
    return updates


def _follower_learner(init: dict[str, Any], rank: int) -> Learner:
    device = "cpu"
    if init["device"] == "cuda":
        index = rank % torch.cuda.device_count()
        torch.cuda.set_device(index)
        device = f"cuda:{index}"
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=io.BytesIO(init["policy"])) as tar:
            tar.extractall(tmp, filter="data")
        policy = load_policy(Path(tmp) / "policy", device=device)
    # Followers never publish: no weight average to keep.
    config = replace(LearnerConfig(**init["config"]), weight_average_decay=0.0)
    learner = Learner(policy, config)
    torch.manual_seed(config.seed + rank)  # word dropout: each rank its own masks
    return learner


def _next_command(store: dist.TCPStore, number: int) -> bytes:
    """Command `number`, however long rank 0 idles for (a replay not ready); a non-blocking check
    with back-off, since a timed-out wait logs a warning per poll. Raises when rank 0 is gone."""
    key, pause = f"cmd/{number}", 0.0005
    while not store.check([key]):
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    return store.get(key)


def _given(draw: Draw) -> Draw:
    return draw


def _discard(_keys: np.ndarray, _priorities: np.ndarray) -> None:
    """Rank 0 writes the priorities back."""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A follower rank of the learner (started by torchrun).")
    parser.add_argument("--rank0", required=True, help="host:port of rank 0's store")
    parser.add_argument("--world", type=int, required=True, help="learner processes, rank 0 included")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s learner-rank %(message)s")
    configure_threads("learner")  # as rank 0 (DISTRL_LEARNER_THREADS, else torch's default)
    log.info("stopped after %d updates", follow(args.rank0, args.world))


if __name__ == "__main__":
    main()
