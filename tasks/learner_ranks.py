"""The learner on several processes (`LearnerParams.learner_processes` > 1).

The `learn` flow's own process is rank 0: it keeps everything that does I/O (the DuckDB replay, the
ingest, the MLflow run, the registry) and runs the flow's tasks as on one process. It starts the
W - 1 follower ranks on this machine, which join the process group through a TCPStore that rank 0
serves on the loopback interface only; the group's own connections (gloo) are bound to loopback
too. For each update rank 0 sends the union batch it drew (with its policy version and update
count); every rank trains on its shard of it (`distrl_core/learner/distributed.py`, where DDP
all-reduces the gradients), and rank 0 writes the priorities of the whole batch back and publishes.
Followers never open the replay, MLflow or the registry: their weights come from rank 0.

What crosses between ranks is never unpickled: rank 0 seals every message (`tasks/rank_channel.py`:
JSON, ``.npy`` and Arrow IPC under an HMAC key that only the ranks it started hold) and broadcasts it
as a tensor; the store carries rendezvous addresses and counters, never the policy or a batch.
Followers are started directly rather than by ``torchrun --standalone``, whose rendezvous store
listens on every interface and unpickles what it reads from it.

    ranks = LearnerRanks.start(learner, 2)
    step = train_step(learner, ranks.sharing(sample), replay.update_priorities)
    ranks.close()
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import torch
import torch.distributed as dist

from distrl_core.learner.config import LearnerConfig
from distrl_core.learner.distributed import DataParallel
from distrl_core.learner.learner import Learner
from distrl_core.learner.step import Draw, train_step
from distrl_core.policy import load_policy, save_policy
from distrl_core.policy.defaults import configure_threads
from tasks.rank_channel import KEY_ENV, Message, broadcast_bytes, key_from_env, new_key, seal, unseal

log = logging.getLogger(__name__)

JOIN_TIMEOUT_S = 300.0  # followers import torch and connect; loading the policy comes after
STOP_TIMEOUT_S = 60.0
COLLECTIVE_TIMEOUT = timedelta(minutes=10)  # one update's all-reduce; followers idle in the store
PROJECT_ROOT = Path(__file__).resolve().parent.parent
LOOPBACK = "127.0.0.1"
GLOO_INTERFACE_ENV = "GLOO_SOCKET_IFNAME"  # the interface gloo binds its connections to


class LearnerRanks:
    """Rank 0's side: the follower processes, the store it serves, the run's key, the command count."""

    def __init__(
        self,
        processes: list[subprocess.Popen[bytes]],
        store: dist.TCPStore,
        listener: socket.socket,
        learner: Learner,
        key: bytes,
    ) -> None:
        self.processes = processes
        self.store = store
        self.listener = listener
        self.learner = learner
        self.key = key
        self.commands = 0

    @classmethod
    def start(cls, learner: Learner, world: int) -> LearnerRanks:
        """Start `world - 1` followers, wait until they joined, send them the policy and make
        `learner` train on rank 0's shard (`Learner.parallel`)."""
        listener = _listen(LOOPBACK)
        port = int(listener.getsockname()[1])
        # The store serves on the socket bound above: TCPStore's own server listens on every interface.
        store = dist.TCPStore(
            LOOPBACK, port, is_master=True, wait_for_workers=False, timeout=COLLECTIVE_TIMEOUT,
            master_listen_fd=listener.fileno(),
        )  # fmt: skip
        key = new_key()
        interface = _loopback_interface()
        env = os.environ | {
            "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")])),
            KEY_ENV: key.hex(),  # the environment: argv is readable by every user in /proc
            GLOO_INTERFACE_ENV: interface,
        }
        processes = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tasks.learner_ranks",
                    f"--store={LOOPBACK}:{port}",
                    f"--rank={rank}",
                    f"--world={world}",
                    f"--device={learner.device.type}",
                ],
                cwd=PROJECT_ROOT,
                env=env,
            )
            for rank in range(1, world)
        ]
        log.info("started %d follower learner rank(s) (pids %s)", world - 1, [p.pid for p in processes])
        try:
            _wait_for_followers(store, processes, world - 1)
            _init_group(learner.device, 0, world, store, interface)
            broadcast_bytes(seal(key, *_init_message(learner)), learner.device)
            learner.parallel = DataParallel(learner.policy, 0, world)
        except BaseException:
            _stop(processes)
            listener.close()
            raise
        return cls(processes, store, listener, learner, key)

    def sharing(self, sample: Callable[[], Draw]) -> Callable[[], Draw]:
        """`sample`, then the draw sent to the followers (a replay not ready sends nothing)."""

        def draw() -> Draw:
            batch = sample()
            rows = batch.rows if isinstance(batch.rows, pa.Table) else pa.Table.from_pylist(batch.rows)
            header = {
                "kind": "update",
                "policy_version": self.learner.policy_version,
                "updates": self.learner.updates,
            }
            self._send(seal(self.key, header, {"keys": batch.keys, "is_weights": batch.is_weights}, rows))
            return Draw(batch.keys, rows, batch.is_weights)  # every rank trains on the rows as sent

        return draw

    def close(self) -> None:
        """Stop the followers (they leave after their last update) and the process group."""
        try:
            if all(p.poll() is None for p in self.processes):
                self._send(seal(self.key, {"kind": "stop"}))
            _stop(self.processes)
        finally:
            self.learner.parallel = None
            if dist.is_initialized():
                dist.destroy_process_group()
            self.listener.close()

    def _send(self, blob: bytes) -> None:
        self.store.add("commands", 1)  # wakes the followers, who wait in the store, not in a collective
        broadcast_bytes(blob, self.learner.device)
        self.commands += 1


def _listen(host: str) -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, 0))
    listener.listen(128)
    return listener


def _loopback_interface() -> str:
    """The name of the interface that holds 127.0.0.1 (`lo` on Linux)."""
    names = [name for _, name in socket.if_nameindex()]
    for candidate in ("lo", "lo0"):
        if candidate in names:
            return candidate
    raise RuntimeError(f"no loopback interface among {names}: several learner processes need one")


def _init_message(learner: Learner) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """What a follower builds its learner from: rank 0's version files (a tar) and config."""
    buffer = io.BytesIO()
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(fileobj=buffer, mode="w") as tar:
        save_policy(learner.policy, Path(tmp) / "policy")
        tar.add(Path(tmp) / "policy", arcname="policy")
    policy = np.frombuffer(buffer.getvalue(), dtype=np.uint8)
    return {"kind": "init", "config": learner.config.to_dict()}, {"policy": policy}


def _wait_for_followers(
    store: dist.TCPStore, processes: list[subprocess.Popen[bytes]], followers: int
) -> None:
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    while store.add("ready", 0) < followers:
        for process in processes:
            if process.poll() is not None:
                raise RuntimeError(
                    f"a follower learner rank exited with code {process.returncode} before the {followers} "
                    "rank(s) joined (its output is above); with learner_processes=1 the learner runs in this process"
                )
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"the {followers} follower learner rank(s) did not join within {JOIN_TIMEOUT_S:.0f} s"
            )
        time.sleep(0.2)


@contextlib.contextmanager
def _gloo_interface(interface: str) -> Iterator[None]:
    """Gloo reads the interface to bind to from the environment when a group is made."""
    before = os.environ.get(GLOO_INTERFACE_ENV)
    os.environ[GLOO_INTERFACE_ENV] = interface
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(GLOO_INTERFACE_ENV, None)
        else:
            os.environ[GLOO_INTERFACE_ENV] = before


def _init_group(device: torch.device, rank: int, world: int, store: dist.Store, interface: str) -> None:
    backend = "nccl" if device.type == "cuda" else "gloo"
    with _gloo_interface(interface):
        dist.init_process_group(
            backend,
            store=dist.PrefixStore("group", store),
            rank=rank,
            world_size=world,
            timeout=COLLECTIVE_TIMEOUT,
        )


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("a follower learner rank did not stop within %.0f s; terminating it", STOP_TIMEOUT_S)
            process.terminate()
            process.wait(timeout=STOP_TIMEOUT_S)


# ----- the follower ranks (started by rank 0) ---------------------------------------------------------


def follow(store_address: str, rank: int, world: int, device_type: str) -> int:
    """A follower's life: join, build the learner from rank 0's files, train on each draw rank 0
    sends until it says stop (or its store goes away: rank 0 ended). Returns the updates made."""
    key = key_from_env()
    host, port = store_address.rsplit(":", 1)
    store = dist.TCPStore(host, int(port), is_master=False, timeout=COLLECTIVE_TIMEOUT)
    device = _follower_device(device_type, rank)
    store.add("ready", 1)
    _init_group(device, rank, world, store, os.environ.get(GLOO_INTERFACE_ENV, _loopback_interface()))
    learner = _follower_learner(_expect(unseal(key, broadcast_bytes(None, device)), "init"), device, rank)
    learner.parallel = DataParallel(learner.policy, rank, world)
    updates = 0
    try:
        while (message := _next_message(store, key, updates, device)).header["kind"] == "update":
            draw = Draw(message.arrays["keys"], message.table, message.arrays["is_weights"])
            learner.policy_version, learner.updates = (
                message.header["policy_version"],
                message.header["updates"],
            )
            train_step(learner, partial(_given, draw), _discard)
            updates += 1
        _expect(message, "stop")
    finally:
        dist.destroy_process_group()
    return updates


def _follower_device(device_type: str, rank: int) -> torch.device:
    if device_type != "cuda":
        return torch.device("cpu")
    index = rank % torch.cuda.device_count()
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def _follower_learner(init: Message, device: torch.device, rank: int) -> Learner:
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=io.BytesIO(init.arrays["policy"].tobytes())) as tar:
            tar.extractall(tmp, filter="data")
        policy = load_policy(Path(tmp) / "policy", device=str(device))
    # Followers never publish: no weight average to keep.
    config = replace(LearnerConfig(**init.header["config"]), weight_average_decay=0.0)
    learner = Learner(policy, config)
    torch.manual_seed(config.seed + rank)  # word dropout: each rank its own masks
    return learner


def _expect(message: Message, kind: str) -> Message:
    if message.header.get("kind") != kind:
        raise RuntimeError(
            f"expected a {kind!r} message from learner rank 0, got {message.header.get('kind')!r}"
        )
    return message


def _next_message(store: dist.TCPStore, key: bytes, number: int, device: torch.device) -> Message:
    """Message `number`, however long rank 0 idles for (a replay not ready): the store's counter is
    polled with back-off, and the broadcast entered only once rank 0 is about to send. Raises when
    rank 0 is gone, and on a message not sealed with this run's key."""
    pause = 0.0005
    while store.add("commands", 0) <= number:
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    return unseal(key, broadcast_bytes(None, device))


def _given(draw: Draw) -> Draw:
    return draw


def _discard(_keys: np.ndarray, _priorities: np.ndarray) -> None:
    """Rank 0 writes the priorities back."""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A follower rank of the learner (started by rank 0).")
    parser.add_argument("--store", required=True, help="host:port of rank 0's store")
    parser.add_argument("--rank", type=int, required=True, help="this process's rank, 1..world-1")
    parser.add_argument("--world", type=int, required=True, help="learner processes, rank 0 included")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="rank 0's device type")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s learner-rank-{args.rank} %(message)s")
    configure_threads("learner")  # as rank 0 (DISTRL_LEARNER_THREADS, else torch's default)
    log.info("stopped after %d updates", follow(args.store, args.rank, args.world, args.device))


if __name__ == "__main__":
    main()
