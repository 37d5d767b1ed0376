"""Follower ranks of the learner, and the launcher that keeps them running on a host.

A follower joins rank 0's store (`tasks/learner_ranks.py`), shows it holds the learner's key (an
HMAC of the run's nonce and its ticket), and is told its rank, the world size and the group's
generation. It then receives rank 0's learner state and trains its shard of every draw rank 0
sends, until rank 0 says stop. When a rank is lost, rank 0 forms a new generation: a follower
whose collective failed, or who sees the generation move on, joins again and gets the state anew.

On a host other than rank 0's, one launcher starts the host's followers and restarts one that dies
(as ``torchrun --max-restarts`` would, without torchrun's rendezvous store, which listens on every
interface and unpickles what it reads)::

    DISTRL_LEARNER_RANK_KEY=<64 hex digits, the head's> \\
        python -m tasks.learner_follower --head 10.0.0.1:29400 --processes 2 --max-restarts 3
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import subprocess
import sys
import time
from datetime import timedelta
from functools import partial
from pathlib import Path

import numpy as np
import psutil
import torch
import torch.distributed as dist

from distrl_core.learner.distributed import DataParallel
from distrl_core.learner.learner import Draw, train_step
from distrl_core.policy.defaults import configure_threads
from tasks.rank_channel import KEY_ENV, Message, broadcast_bytes, join_proof, key_from_env, unseal
from tasks.rank_state import follower_learner

log = logging.getLogger(__name__)

COLLECTIVE_TIMEOUT = timedelta(minutes=10)  # one update's all-reduce; followers idle in the store
GLOO_INTERFACE_ENV = "GLOO_SOCKET_IFNAME"  # the interface gloo binds its connections to
PROJECT_ROOT = Path(__file__).resolve().parent.parent
PROOF_WAIT_S = 10.0


class Rejoin(Exception):
    """This generation of the group is over (a rank was lost): join the next one."""


def interface_of(address: str) -> str:
    """The network interface that holds `address` (gloo binds to an interface, not an address)."""
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == address for a in addresses):
            return name
    raise RuntimeError(
        f"no network interface holds {address}: give the learner's address on this host, or the "
        f"interface itself ({GLOO_INTERFACE_ENV} / --interface)"
    )


def address_towards(host: str, port: int) -> str:
    """This host's address on the route to `host` (no packet is sent: a UDP socket's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((host, port))
        return str(probe.getsockname()[0])


def init_group(device: torch.device, rank: int, world: int, store: dist.Store, generation: int) -> None:
    """Join generation `generation`'s process group (its keys apart from every earlier one's)."""
    backend = "nccl" if device.type == "cuda" else "gloo"
    prefix = dist.PrefixStore(f"g{generation}", store)
    dist.init_process_group(backend, store=prefix, rank=rank, world_size=world, timeout=COLLECTIVE_TIMEOUT)


def is_lost_rank(error: BaseException) -> bool:
    """Whether `error` is a collective that failed because a peer went away (not a bug)."""
    if isinstance(error, dist.DistError):
        return True
    text = str(error)
    return isinstance(error, RuntimeError) and any(
        s in text for s in ("Connection closed", "Connection reset", "Broken pipe", "Timed out", "gloo")
    )


# ----- one follower ---------------------------------------------------------------------------------


def follow(head: str, local_rank: int, device_type: str) -> int:
    """A follower's life: join, train each generation until rank 0 says stop. Returns its updates."""
    key = key_from_env()
    assert key is not None
    host, port = head.rsplit(":", 1)
    store = dist.TCPStore(host, int(port), is_master=False, timeout=COLLECTIVE_TIMEOUT)
    device = _device(device_type, local_rank)
    nonce = store.get("nonce")
    updates = 0
    while not store.check(["stopped"]):
        ticket = store.add("tickets", 1)
        store.set(f"proof/{ticket}", join_proof(key, nonce, ticket))  # type: ignore[arg-type]
        assignment = _assignment(store, ticket)
        if assignment is None:
            break
        if assignment.get("refused"):
            raise RuntimeError(f"rank 0 refused this follower: {assignment['refused']}")
        if assignment.get("surplus"):
            time.sleep(1.0)  # the group is full at a size the batch divides by; wait for the next
            continue
        try:
            updates += _generation(store, key, device, assignment)
            break
        except Rejoin as why:
            log.info("rejoining: %s", why)
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
    return updates


def _device(device_type: str, local_rank: int) -> torch.device:
    if device_type != "cuda":
        return torch.device("cpu")
    index = local_rank % torch.cuda.device_count()
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def _assignment(store: dist.TCPStore, ticket: int) -> dict[str, object] | None:
    while not store.check([f"assign/{ticket}"]):
        if store.check(["stopped"]):
            return None
        time.sleep(0.05)
    return dict(json.loads(store.get(f"assign/{ticket}")))


def _generation(store: dist.TCPStore, key: bytes, device: torch.device, assignment: dict[str, object]) -> int:
    """Train in one generation of the group until stop (returns the updates) or `Rejoin`."""
    generation, rank, world = (int(assignment[k]) for k in ("generation", "rank", "world"))  # type: ignore[call-overload]
    try:
        init_group(device, rank, world, store, generation)
        learner = follower_learner(_expect(unseal(key, broadcast_bytes(None, device)), "init"), device, rank)
        learner.parallel = DataParallel(learner.policy, rank, world)
    except Exception as error:
        if is_lost_rank(error):
            raise Rejoin(f"generation {generation} failed to form: {error}") from error
        raise
    updates = 0
    while True:
        message = _next_message(store, key, generation, updates, device)
        if message.header["kind"] == "stop":
            return updates
        draw = Draw(message.arrays["keys"], message.table, message.arrays["is_weights"])
        learner.policy_version, learner.updates = message.header["policy_version"], message.header["updates"]
        try:
            train_step(learner, partial(_given, draw), _discard)
        except Exception as error:
            if is_lost_rank(error):
                raise Rejoin(f"an update of generation {generation} failed: {error}") from error
            raise
        updates += 1


def _next_message(
    store: dist.TCPStore, key: bytes, generation: int, number: int, device: torch.device
) -> Message:
    """Message `number` of this generation, however long rank 0 idles for (a replay not ready): the
    store's counter is polled with back-off, and the broadcast entered only once rank 0 is about
    to send. `Rejoin` when rank 0 formed a newer generation; raises when rank 0 is gone."""
    pause, counter = 0.0005, f"g{generation}/commands"
    while store.add(counter, 0) <= number:
        if store.add("generation", 0) > generation:
            raise Rejoin(f"rank 0 formed generation {store.add('generation', 0)}")
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    try:
        return _expect(unseal(key, broadcast_bytes(None, device)), "update", "stop")
    except Exception as error:
        if is_lost_rank(error):
            raise Rejoin(f"a message of generation {generation} was cut: {error}") from error
        raise


def _expect(message: Message, *kinds: str) -> Message:
    if message.header.get("kind") not in kinds:
        raise RuntimeError(
            f"expected a {kinds} message from learner rank 0, got {message.header.get('kind')!r}"
        )
    return message


def _given(draw: Draw) -> Draw:
    return draw


def _discard(_keys: np.ndarray, _priorities: np.ndarray) -> None:
    """Rank 0 writes the priorities back."""


# ----- the launcher: a host's followers, restarted when one dies -------------------------------------


class Followers:
    """Follower processes on this host; `restart_dead` replaces the ones that failed."""

    def __init__(
        self,
        head: str,
        count: int,
        device: str,
        interface: str,
        key: bytes,
        max_restarts: int,
        first_local_rank: int = 0,
    ) -> None:
        """`first_local_rank`: 1 on rank 0's host, whose process holds local rank 0 (its first GPU)."""
        self.head, self.device, self.max_restarts = head, device, max_restarts
        self.first_local_rank = first_local_rank
        self.env = os.environ | {
            "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")])),
            KEY_ENV: key.hex(),  # the environment: argv is readable by every user in /proc
            GLOO_INTERFACE_ENV: interface,
        }
        self.restarts = 0
        self.processes = [self._spawn(first_local_rank + i) for i in range(count)]

    def _spawn(self, local_rank: int) -> subprocess.Popen[bytes]:
        argv = [
            sys.executable, "-m", "tasks.learner_follower", "--follow", f"--head={self.head}",
            f"--local-rank={local_rank}", f"--device={self.device}",
        ]  # fmt: skip
        return subprocess.Popen(argv, cwd=PROJECT_ROOT, env=self.env | {"LOCAL_RANK": str(local_rank)})

    def restart_dead(self) -> list[int]:
        """Start again each follower that exited with an error, while restarts are left; their
        local ranks."""
        restarted = []
        for i, process in enumerate(self.processes):
            if process.poll() not in (None, 0) and self.restarts < self.max_restarts:
                log.warning(
                    "follower learner rank (local %d) exited with %s; restarting it", i, process.returncode
                )
                self.restarts += 1
                self.processes[i] = self._spawn(self.first_local_rank + i)
                restarted.append(i)
        return restarted

    def running(self) -> bool:
        return any(p.poll() is None for p in self.processes)

    def wait(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for process in self.processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("a follower learner rank did not stop within %.0f s; terminating it", timeout_s)
                process.terminate()
                process.wait(timeout=timeout_s)


def launch(head: str, processes: int, device: str, interface: str | None, max_restarts: int) -> int:
    """Run `processes` followers for the learner whose rank 0 serves at `head` until it stops them;
    the worst exit code."""
    key = key_from_env()
    assert key is not None
    host, port = head.rsplit(":", 1)
    interface = (
        interface or os.environ.get(GLOO_INTERFACE_ENV) or interface_of(address_towards(host, int(port)))
    )
    followers = Followers(head, processes, device, interface, key, max_restarts)
    log.info("started %d follower learner rank(s) towards %s on %s", processes, head, interface)
    while followers.running() or followers.restart_dead():
        time.sleep(0.5)
        followers.restart_dead()
    return max(abs(p.returncode or 0) for p in followers.processes)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Follower ranks of the learner, on a host of their own.")
    parser.add_argument("--head", required=True, help="host:port of rank 0's store (the learner's head)")
    parser.add_argument("--processes", type=int, default=1, help="follower ranks on this host")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="rank 0's device type")
    parser.add_argument(
        "--interface", default=None, help="network interface for gloo (default: towards head)"
    )
    parser.add_argument("--max-restarts", type=int, default=3, help="restarts of failed followers, in all")
    parser.add_argument("--follow", action="store_true", help=argparse.SUPPRESS)  # one follower (internal)
    parser.add_argument("--local-rank", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    name = f"learner-follower-{args.local_rank}" if args.follow else "learner-launcher"
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {name} %(message)s")
    if not args.follow:
        sys.exit(launch(args.head, args.processes, args.device, args.interface, args.max_restarts))
    configure_threads("learner")  # as rank 0 (DISTRL_LEARNER_THREADS, else torch's default)
    log.info("stopped after %d updates", follow(args.head, args.local_rank, args.device))
    # The follower keeps nothing to save (rank 0 publishes), and letting the interpreter tear down
    # torch's C++ objects after gloo closed can abort the process ("terminate called without an
    # active exception", exit -6) although every update finished: leave without that teardown.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
