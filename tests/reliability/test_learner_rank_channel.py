"""The learner's ranks talk over loopback only, in sealed, pickle-free messages: a process without
the run's key — on this host or in another network namespace — can neither read the policy nor
make a rank run anything."""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pytest
import torch.distributed as dist

from bench import netns
from distrl_core.learner import Learner, LearnerConfig
from distrl_core.learner.learner import Draw
from distrl_core.policy import load_policy, save_policy
from tasks.learner_ranks import LearnerRanks
from tasks.rank_channel import SealError, new_key, seal, unseal
from tests.tasks.test_learner_ranks import replay_of

CONFIG = {"micro_batch_size": 4, "critic_warmup_updates": 0, "entity_dropout": 0.0, "word_dropout": 0.0}


class _Marker:
    """Unpickling this creates a file: proof that a payload was unpickled."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str, ...]]:
        return (os.system, (f"touch {self.path}",))


def test_a_sealed_message_comes_back_exactly_and_a_tampered_one_is_refused() -> None:
    key = new_key()
    table = pa.table({"step": [0, 1, 2], "text": ["a", "b\x1b", "ç"]})
    arrays = {"keys": np.arange(5, dtype=np.int64), "w": np.linspace(0, 1, 5, dtype=np.float32)}
    blob = seal(key, {"kind": "update", "updates": 7}, arrays, table)
    message = unseal(key, blob)
    assert message.header == {"kind": "update", "updates": 7}
    assert message.table is not None and message.table.equals(table)
    for name, value in arrays.items():
        np.testing.assert_array_equal(message.arrays[name], value)
        assert message.arrays[name].dtype == value.dtype
    flipped = bytearray(blob)
    flipped[-1] ^= 1
    with pytest.raises(SealError, match="failed authentication"):
        unseal(key, bytes(flipped))
    with pytest.raises(SealError, match="failed authentication"):
        unseal(new_key(), blob)  # sealed under another run's key


def test_a_pickle_is_never_unpickled_even_when_framed_like_a_message(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    payload = pickle.dumps(("update", _Marker(str(marker))))
    for blob in (payload, b"DRLRANK1" + b"\0" * 32 + payload):
        with pytest.raises(SealError):
            unseal(new_key(), blob)
    with pytest.raises(ValueError, match="Object arrays cannot be saved"):
        seal(new_key(), {"kind": "x"}, {"objects": np.array([_Marker(str(marker))], dtype=object)})
    assert not marker.exists()


def _listening(pids: list[int]) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket the processes listen on."""
    found = []
    for pid in pids:
        for conn in psutil.Process(pid).net_connections(kind="inet"):
            if conn.status == psutil.CONN_LISTEN:
                found.append((conn.laddr.ip, conn.laddr.port))
    return found


def _attack_store(port: int, marker: Path) -> list[str]:
    """What a process without the key can do to the store: the keys it could read, and pickled
    commands written under every name the channel ever used."""
    outsider = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=10))
    readable = [k for k in ("init", "policy", "cmd/0", "cmd/1", "draw") if outsider.check([k])]
    evil = pickle.dumps(("update", _Marker(str(marker)), 0, 0))
    for name in ("init", "cmd/0", "cmd/1", "cmd/2"):
        outsider.set(name, evil)  # type: ignore[arg-type]  # the binding takes bytes
    outsider.add("commands", 1)  # wakes the follower early: it must wait for rank 0's own message
    return readable


@pytest.mark.slow  # a second learner process imports torch and trains
def test_an_outsider_on_this_host_can_neither_read_the_policy_nor_run_code_in_a_rank(
    episode_rows, make_policy, tmp_path
) -> None:
    save_policy(make_policy(), tmp_path / "v1")
    replay = replay_of(episode_rows, tmp_path / "store")
    learner = Learner(load_policy(tmp_path / "v1"), LearnerConfig(**CONFIG))
    marker = tmp_path / "code-ran"
    ranks = LearnerRanks.start(learner, 2)
    try:
        pids = [os.getpid(), *(p.pid for p in ranks.processes)]
        sockets = _listening(pids)
        assert sockets and all(address == "127.0.0.1" for address, _ in sockets), sockets
        assert _attack_store(ranks.store.port, marker) == []  # nothing of the run lives in the store
        for seed in (5, 6):
            batch = replay.sample(8, beta=0.4, seed=seed)
            ranks.train_step(lambda b=batch: Draw(b.slots, b.steps, b.is_weights), replay.update_priorities)
    finally:
        ranks.close()
        replay.close()
    assert [p.returncode for p in ranks.processes] == [0]  # the follower trained both updates and left
    assert not marker.exists()


_PROBE = """
import socket, sys
address, ports = sys.argv[1], [int(p) for p in sys.argv[2:]]
for port in ports:
    try:
        socket.create_connection((address, port), timeout=3).close()
        print(f"open {port}")
    except OSError as error:
        print(f"closed {port} {type(error).__name__}")
"""


@pytest.mark.slow
@pytest.mark.netns
def test_no_learner_port_answers_from_another_network_namespace(make_policy, tmp_path) -> None:
    reason = netns.unavailable()
    if reason is not None:
        pytest.skip(f"network namespaces unavailable: {reason}")
    save_policy(make_policy(), tmp_path / "v1")
    learner = Learner(load_policy(tmp_path / "v1"), LearnerConfig(**CONFIG))
    with netns.Network(["outsider"]) as net:
        # A control listener on every interface proves the outsider can reach this host at all.
        control = socket.create_server(("0.0.0.0", 0))
        ranks = LearnerRanks.start(learner, 2)
        try:
            learner_pids = [os.getpid(), *(p.pid for p in ranks.processes)]
            ports = [port for _, port in _listening(learner_pids) if port != control.getsockname()[1]]
            probe = net.argv("outsider", [sys.executable, "-c", _PROBE, net.operator_address])
            seen = subprocess.run(
                [*probe, str(control.getsockname()[1]), *map(str, ports)],
                capture_output=True, text=True, timeout=60, check=True,
            ).stdout.splitlines()  # fmt: skip
        finally:
            ranks.close()
            control.close()
    assert seen[0].startswith("open"), seen  # the namespace reaches this host's address
    assert len(seen) == 1 + len(ports) and all(line.startswith("closed") for line in seen[1:]), seen
