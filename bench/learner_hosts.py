"""The learner across two hosts (network namespaces): rank 0 in this process on the bridge's address,
one follower that another host's launcher (`python -m tasks.learner_follower`) starts — against one
process on the same draws; optionally the follower is SIGKILLed before an update, and its launcher
restarts it.

    .venv/bin/python -m bench.learner_hosts [--updates 8] [--kill-before 3]

Writes bench/results/learner_hosts.json: per run, the largest difference from one process in the
priorities and the weights (raw and published), each update's seconds and group size, the lost
ranks and how long the interrupted update took with the recovery. Needs root (network namespaces).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

from bench._common import RESULTS, machine
from bench.learner_ddp import CONFIG, _batches, _given

REPO = Path(__file__).resolve().parents[1]

# The score head's last bias adds one constant to every candidate's score, which the softmax over
# the candidates ignores: its true gradient is 0 and the computed one is rounding, which Adam turns
# into a step of up to a few learning rates of either sign. Two processes round the gradient's sum
# differently from one, so this weight agrees only to within Adam's steps, every other one to 1e-6
# (tests/learner/test_distributed.py proves that the bias cannot change a log-probability).
SHIFT_ONLY = "heads.score.2.bias"


class _CountLost(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lost = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.lost += "a learner rank was lost" in record.getMessage()


def two_hosts(updates: int, kill_before: int | None, batch_size: int = 8) -> dict[str, Any]:
    """One run: `updates` updates on rank 0 here and a follower on another host, and the same
    draws on one process; the follower killed before update `kill_before` (0-based) if given."""
    import numpy as np
    import psutil

    from bench import netns
    from distrl_core.learner import Learner, LearnerConfig
    from distrl_core.learner.learner import train_step
    from distrl_core.policy import Policy, PolicyConfig, load_policy, save_policy
    from tasks.learner_ranks import LearnerRanks, RankNetwork
    from tasks.rank_channel import KEY_ENV, new_key

    draws = _batches(updates, batch_size)
    with tempfile.TemporaryDirectory() as tmp:
        save_policy(Policy.create(PolicyConfig(device="cpu")), Path(tmp) / "v1")
        # Micro-batches of a rank's share: one process then sums the same partial gradients in the
        # same order as the all-reduce, so the comparison is exact (with larger ones float32 sums
        # differ in their last bits, and Adam's first steps magnify that to ~1e-4).
        config = LearnerConfig(**(CONFIG | {"micro_batch_size": batch_size // 2}))
        single = Learner(load_policy(Path(tmp) / "v1"), config)
        learner = Learner(load_policy(Path(tmp) / "v1"), config)
    at_start = policy_state(learner)
    want: list[Any] = []
    for draw in draws:
        train_step(single, partial(_given, draw), lambda _k, p: want.append(p))
    got: list[Any] = []
    seconds, worlds = [], []
    counter = _CountLost()
    logging.getLogger("tasks.learner_ranks").addHandler(counter)
    key = new_key()
    with netns.Network(["follower-host"]) as net:
        head = net.operator_address
        with socket.socket() as probe:
            probe.bind((head, 0))
            port = int(probe.getsockname()[1])
        env = os.environ | {KEY_ENV: key.hex(), "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
        argv = [sys.executable, "-m", "tasks.learner_follower", f"--head={head}:{port}", "--max-restarts=2"]
        launcher = subprocess.Popen(net.argv("follower-host", argv), env=env, cwd=REPO)
        os.environ[KEY_ENV] = key.hex()
        try:
            network = RankNetwork(address=head, port=port, remote_processes=1, rejoin_timeout_s=120)
            ranks = LearnerRanks.start(learner, 1, network, batch_size=batch_size)
            try:
                for n, draw in enumerate(draws):
                    if n == kill_before:
                        (follower,) = psutil.Process(launcher.pid).children()
                        follower.send_signal(signal.SIGKILL)
                        follower.wait(30)
                    started = time.perf_counter()
                    ranks.train_step(partial(_given, draw), lambda _k, p: got.append(p))
                    seconds.append(round(time.perf_counter() - started, 3))
                    worlds.append(ranks.world)
            finally:
                ranks.close()
            launcher.wait(timeout=120)
        finally:
            os.environ.pop(KEY_ENV, None)
            logging.getLogger("tasks.learner_ranks").removeHandler(counter)
            if launcher.poll() is None:
                launcher.kill()
    have, reference = policy_state(learner), policy_state(single)
    diffs = {k: float((have[k].float() - v.float()).abs().max()) for k, v in reference.items()}
    return {
        "updates": updates,
        "killed_before_update": kill_before,
        "lost_ranks_seen": counter.lost,
        "group_sizes": worlds,
        "update_seconds": seconds,
        "priorities_written": len(got),
        "max_priority_diff": float(max(np.abs(a - b).max() for a, b in zip(got, want, strict=True))),
        "max_weight_diff": max(d for k, d in diffs.items() if not k.endswith(SHIFT_ONLY)),
        "shift_only_bias_diff": max(d for k, d in diffs.items() if k.endswith(SHIFT_ONLY)),
        "weights_moved": any(not bool((have[k] == v).all()) for k, v in at_start.items()),
        "launcher_exit": launcher.returncode,
    }


def policy_state(learner: Any) -> dict[str, Any]:
    """The raw and the published (averaged) weights of the learner's policy."""
    policy = learner.policy
    raw = {f"raw.{k}": v.detach().clone() for k, v in _named(policy).items()}
    with learner.averaged():
        published = {f"published.{k}": v.detach().clone() for k, v in _named(policy).items()}
    return raw | published


def _named(policy: Any) -> dict[str, Any]:
    return {f"model.{k}": v for k, v in policy.model.state_dict().items()} | {
        f"heads.{k}": v for k, v in policy.heads.state_dict().items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--updates", type=int, default=8, help="updates per run")
    parser.add_argument(
        "--kill-before", type=int, default=3, help="the update before which the follower dies"
    )
    parser.add_argument("--out", default=str(RESULTS / "learner_hosts.json"))
    args = parser.parse_args()
    os.environ["DISTRL_LEARNER_THREADS"] = "1"
    logging.basicConfig(level=logging.WARNING)
    runs = [two_hosts(args.updates, None), two_hosts(args.updates, args.kill_before)]
    result = {
        "bench": "learner_hosts",
        "command": f"python -m bench.learner_hosts --updates {args.updates} --kill-before {args.kill_before}",
        "machine": machine(),
        "runs": runs,
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
