"""The learner on several processes (`LearnerParams.learner_processes` > 1), on one host or several.

The `learn` flow's own process is rank 0: it keeps everything that does I/O (the DuckDB replay, the
ingest, the MLflow run, the registry) and runs the flow's tasks as on one process. It is also the
rendezvous: it serves the TCPStore the followers join through, on a socket it binds itself to one
address (127.0.0.1 on one host; the head's address on the learner network otherwise — TCPStore's
own server would listen on every interface), starts the followers of its own host
(`tasks/learner_follower.py`), and admits those that other hosts' launchers start once they show
they hold the learner's key. For each update rank 0 sends the union batch it drew; every rank
trains on its shard of it (`distrl_core/learner/distributed.py`, where DDP all-reduces the
gradients), and rank 0 writes the priorities of the whole batch back and publishes.

Nothing between ranks is unpickled: every message is sealed (`tasks/rank_channel.py`) and travels
as a tensor; the store holds addresses, counters and proofs, never the policy or a batch.

A lost rank (a follower killed, a host gone) fails the update's collective on rank 0. Rank 0 then
forms a new generation of the group with the followers that (re)join within `rejoin_timeout_s`
(its own host's it restarts itself), at the largest size the batch divides by, sends them its
current state, and trains the same draw again: no update is lost or applied twice, and since
publishing follows a finished update, no version either.

    ranks = LearnerRanks.start(learner, 2)
    step = ranks.train_step(sample, replay.update_priorities)
    ranks.close()
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import secrets
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from functools import partial

import numpy as np
import pyarrow as pa
import torch
import torch.distributed as dist

from distrl_core.learner.distributed import DataParallel
from distrl_core.learner.learner import Draw, Learner, Sampled, StepResult, train_step
from distrl_core.learner.task_stats import options_active
from tasks.learner_follower import GLOO_INTERFACE_ENV, Followers, init_group, interface_of, is_lost_rank
from tasks.rank_channel import broadcast_bytes, join_proof, key_from_env, new_key, seal
from tasks.rank_state import learner_state

log = logging.getLogger(__name__)

JOIN_TIMEOUT_S = 300.0  # followers import torch and connect; loading the policy comes after
STOP_TIMEOUT_S = 60.0
COLLECTIVE_TIMEOUT = timedelta(minutes=10)
MAX_REGROUPS_PER_UPDATE = 3
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class RankNetwork:
    """Where the learner's ranks meet, and how a lost one is waited for."""

    address: str = LOOPBACK
    """Rank 0's store binds here: loopback on one host; the head's address on the learner network
    when other hosts run followers (`python -m tasks.learner_follower --head ADDRESS:PORT`)."""
    port: int = 0
    """The store's port; 0 takes a free one (one host). Fixed when other hosts must find it."""
    interface: str | None = None
    """The network interface gloo binds to; None: the one that holds `address`."""
    remote_processes: int = 0
    """Follower ranks started on other hosts; they need the key in DISTRL_LEARNER_RANK_KEY here and there."""
    rejoin_timeout_s: float = 120.0
    """After a rank is lost: how long rank 0 waits for the group to fill again before it goes on
    with the ranks it has (down to itself alone)."""
    max_restarts: int = 3
    """Restarts of this host's failed followers, in all."""


class LearnerRanks:
    """Rank 0's side: the store, the run's key, this host's followers, the current generation."""

    def __init__(
        self, learner: Learner, local_processes: int, network: RankNetwork, batch_size: int | None
    ) -> None:
        self.learner, self.network, self.batch_size = learner, network, batch_size
        self.listener = _listen(network.address, network.port)
        self.port = int(self.listener.getsockname()[1])
        # The store serves on the socket bound above: TCPStore's own server listens on every interface.
        self.store = dist.TCPStore(
            network.address, self.port, is_master=True, wait_for_workers=False, timeout=COLLECTIVE_TIMEOUT,
            master_listen_fd=self.listener.fileno(),
        )  # fmt: skip
        self.key = key_from_env(required=network.remote_processes > 0) or new_key()
        self.nonce = secrets.token_bytes(16)
        self.store.set("nonce", self.nonce)  # type: ignore[arg-type]  # the binding takes bytes
        self.interface = network.interface or interface_of(network.address)
        self.expected = local_processes - 1 + network.remote_processes  # followers in a full group
        self.generation, self.world, self.tickets_seen, self.commands = 0, 1, 0, 0
        self.followers = Followers(
            f"{network.address}:{self.port}", local_processes - 1, learner.device.type, self.interface,
            self.key, network.max_restarts, first_local_rank=1,
        )  # fmt: skip

    @classmethod
    def start(
        cls, learner: Learner, world: int, network: RankNetwork | None = None, batch_size: int | None = None
    ) -> LearnerRanks:
        """Start this host's `world - 1` followers, admit them and the remote ones, send them the
        learner's state, and make `learner` train on rank 0's shard (`Learner.parallel`)."""
        ranks = cls(learner, world, network or RankNetwork(), batch_size)
        try:
            ranks._form(JOIN_TIMEOUT_S, require_all=True)
        except BaseException:
            ranks._shutdown()
            raise
        log.info("started %d follower learner rank(s) (pids %s)", world - 1, [p.pid for p in ranks.processes])
        return ranks

    @property
    def processes(self) -> list[subprocess.Popen[bytes]]:
        """This host's follower processes."""
        return self.followers.processes

    def train_step(
        self, sample: Callable[[], Sampled], write_back: Callable[[np.ndarray, np.ndarray], None]
    ) -> StepResult:
        """`train_step` on all ranks: draw (a replay not ready sends nothing), send, update. A
        rank lost on the way forms a new generation and the same draw is trained again."""
        drawn = sample()
        rows = drawn.steps if isinstance(drawn.steps, pa.Table) else pa.Table.from_pylist(drawn.steps)
        draw = Draw(drawn.slots, rows, drawn.is_weights)  # every rank trains on the rows as sent
        for regroups in range(MAX_REGROUPS_PER_UPDATE + 1):
            rng = torch.get_rng_state()
            stats = copy.deepcopy(self.learner.task_stats) if options_active(self.learner.config) else None
            try:
                if self.world > 1:
                    header = {
                        "kind": "update", "policy_version": self.learner.policy_version,
                        "updates": self.learner.updates,
                    }  # fmt: skip
                    self._send(
                        seal(self.key, header, {"keys": draw.slots, "is_weights": draw.is_weights}, rows)
                    )
                return train_step(self.learner, partial(_given, draw), write_back)
            except Exception as error:
                if not is_lost_rank(error) or regroups == MAX_REGROUPS_PER_UPDATE:
                    raise
                log.warning(
                    "a learner rank was lost (%s); forming the group again", str(error).splitlines()[0]
                )
                torch.set_rng_state(rng)  # the update is trained again as if for the first time
                if stats is not None:
                    self.learner.task_stats = stats
                self._regroup()
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Stop the followers (they leave after their last update) and the process group."""
        try:
            if self.world > 1:
                self._send(seal(self.key, {"kind": "stop"}))
        except Exception as error:  # a follower already gone: the others see "stopped"
            log.warning("could not tell every follower to stop: %s", str(error).splitlines()[0])
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        try:
            self.store.set("stopped", "1")
            self.followers.wait(STOP_TIMEOUT_S)
        finally:
            self.learner.parallel = None
            if dist.is_initialized():
                dist.destroy_process_group()
            self.listener.close()

    def _send(self, blob: bytes) -> None:
        self.store.add(f"g{self.generation}/commands", 1)  # wakes the followers, idle in the store
        broadcast_bytes(blob, self.learner.device)
        self.commands += 1

    def _regroup(self) -> None:
        self.learner.parallel = None
        self.store.add("generation", 1)  # followers idle in the store leave this generation
        if dist.is_initialized():
            dist.destroy_process_group()
        self.followers.restart_dead()
        self._form(self.network.rejoin_timeout_s, require_all=False)

    def _form(self, timeout_s: float, require_all: bool) -> None:
        """Admit followers until the group is full or `timeout_s` passed, then form a generation at
        the largest size the batch divides by and send every follower the learner's state."""
        admitted = self._admit(timeout_s, require_all)
        world = 1 + len(admitted)
        while self.batch_size is not None and self.batch_size % world:
            world -= 1
        self.generation = self.store.add("generation", 1)
        for i, ticket in enumerate(admitted):
            answer = (
                {"generation": self.generation, "rank": i + 1, "world": world}
                if i + 1 < world
                else {"surplus": 1}
            )
            self.store.set(f"assign/{ticket}", json.dumps(answer))
        self.world = world
        if world == 1:
            log.warning("the learner goes on alone: no follower rank (re)joined within %.0f s", timeout_s)
            return
        if world < 1 + self.expected:
            log.warning("the learner goes on with %d of %d ranks", world, 1 + self.expected)
        with _gloo_interface(self.interface):
            init_group(self.learner.device, 0, world, self.store, self.generation)
        broadcast_bytes(seal(self.key, *learner_state(self.learner)), self.learner.device)
        self.learner.parallel = DataParallel(self.learner.policy, 0, world)

    def _admit(self, timeout_s: float, require_all: bool) -> list[int]:
        """Tickets of followers that proved they hold the key, up to `expected` of them."""
        deadline, admitted = time.monotonic() + timeout_s, list[int]()
        while len(admitted) < self.expected:
            issued = self.store.add("tickets", 0)
            for ticket in range(self.tickets_seen + 1, issued + 1):
                if self._proof_holds(ticket):
                    admitted.append(ticket)
                else:
                    self.store.set(
                        f"assign/{ticket}", json.dumps({"refused": "its learner key is not rank 0's"})
                    )
            self.tickets_seen = issued
            local_failed = [p for p in self.followers.processes if p.poll() not in (None, 0)]
            if local_failed and not self.followers.restart_dead() and require_all:
                raise RuntimeError(
                    f"a follower learner rank exited with code {local_failed[0].returncode} before the group "
                    "formed (its output is above); with learner_processes=1 the learner runs in this process"
                )
            if time.monotonic() > deadline:
                if require_all:
                    raise TimeoutError(
                        f"{len(admitted)} of {self.expected} follower learner rank(s) joined within {timeout_s:.0f} s"
                    )
                break
            time.sleep(0.1)
        return admitted[: self.expected]

    def _proof_holds(self, ticket: int) -> bool:
        deadline = time.monotonic() + 10.0
        while not self.store.check([f"proof/{ticket}"]):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        want = join_proof(self.key, self.nonce, ticket)
        return secrets.compare_digest(bytes(self.store.get(f"proof/{ticket}")), want)


def _listen(host: str, port: int) -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(128)
    return listener


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


def _given(draw: Draw) -> Draw:
    return draw
