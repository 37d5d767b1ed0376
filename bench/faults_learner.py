"""Fault rows for the learner on several processes: an outsider at the ranks' store and ports.

`learner_rank_outsider`: while rank 0 and a follower train, a process without the run's key
connects to the store (loopback) `attempts` times, reads every key an earlier channel used and
writes a pickled command under each, and bumps the command counter; leaked counts keys it could
read and payloads that ran (a marker file), crashed an update or follower that failed.
`learner_rank_ports_from_namespace`: a process in another network namespace tries every port the
learner processes listen on; leaked counts those that answered.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

from bench.faults_env import row

_KEYS = ("init", "policy", "cmd/0", "cmd/1", "draw")


class _Marker:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str, ...]]:
        return (os.system, (f"touch {self.path}",))


def _listening(pids: list[int]) -> list[int]:
    import psutil

    return [
        c.laddr.port
        for pid in pids
        for c in psutil.Process(pid).net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    ]


def _with_ranks(run: Any, updates: int) -> tuple[int, int, Any]:
    """Train `updates` updates on two ranks, calling `run(ranks)` before each; (crashed, exit, result)."""
    from bench.learner_ddp import CONFIG, _batches, _given
    from distrl_core.learner import Learner, LearnerConfig
    from distrl_core.policy import Policy, PolicyConfig
    from tasks.learner_ranks import LearnerRanks

    learner = Learner(Policy.create(PolicyConfig(device="cpu")), LearnerConfig(**CONFIG))
    ranks = LearnerRanks.start(learner, 2)
    crashed, results = 0, []
    try:
        for draw in _batches(updates, 8):
            results.append(run(ranks))
            try:
                ranks.train_step(partial(_given, draw), lambda _k, _p: None)
            except Exception:  # counted: an update the outsider broke
                crashed += 1
                break
    finally:
        ranks.close()
    return crashed, max(abs(p.returncode or 0) for p in ranks.processes), results


def learner_rank_outsider(attempts: int = 20) -> dict[str, Any]:
    import torch.distributed as dist

    with tempfile.TemporaryDirectory() as tmp:
        marker = Path(tmp) / "code-ran"

        evil = pickle.dumps(("update", _Marker(str(marker)), 0, 0))

        def attack(ranks: Any) -> int:
            readable = 0  # keys holding anything but the outsider's own payload
            for _ in range(attempts // 4):
                outsider = dist.TCPStore(
                    "127.0.0.1", ranks.store.port, is_master=False, timeout=timedelta(seconds=10)
                )
                readable += sum(outsider.check([k]) and outsider.get(k) != evil for k in _KEYS)
                for key in _KEYS:
                    outsider.set(key, evil)  # type: ignore[arg-type]  # the binding takes bytes
                outsider.add("commands", 1)
            return readable

        crashed, exit_code, readable = _with_ranks(attack, 4)
        ran = int(marker.exists())
    return row(
        "learner_rank_outsider", attempts, crashed=crashed + int(exit_code != 0), leaked=sum(readable) + ran,
        detail=f"{sum(readable)} keys readable, payload ran: {bool(ran)}, follower exit {exit_code}",
    )  # fmt: skip


_PROBE = (
    "import socket,sys\n"
    "for p in sys.argv[2:]:\n"
    "    try: socket.create_connection((sys.argv[1], int(p)), timeout=3).close(); print('open')\n"
    "    except OSError: print('closed')\n"
)


def learner_rank_ports_from_namespace() -> dict[str, Any]:
    from bench import netns

    reason = netns.unavailable()
    if reason is not None:
        return row("learner_rank_ports_from_namespace", 0, detail=f"skipped: {reason}")
    with netns.Network(["outsider"]) as net:

        def probe(ranks: Any) -> list[str]:
            ports = _listening([os.getpid(), *(p.pid for p in ranks.processes)])
            argv = net.argv(
                "outsider", [sys.executable, "-c", _PROBE, net.operator_address, *map(str, ports)]
            )
            return subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.split()

        crashed, exit_code, seen = _with_ranks(probe, 2)
    tried = [s for answer in seen for s in answer]
    return row(
        "learner_rank_ports_from_namespace", len(tried), crashed=crashed + int(exit_code != 0),
        leaked=tried.count("open"), detail=f"{len(tried)} connections to the learner's ports from another namespace",
    )  # fmt: skip


SCENARIOS = [learner_rank_outsider, learner_rank_ports_from_namespace]
