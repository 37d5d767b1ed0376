"""The learner's state as plain data, so that a follower rank joining at any update — at the start,
or after a rank was lost and the group formed again — trains exactly as rank 0 would.

DDP all-reduces gradients but never re-sends weights or optimiser moments, so a follower must start
from rank 0's current weights, AdamW moments, update count and (for the MobileRL-style options)
task statistics. `learner_state` packs them as a JSON header and numpy arrays for `rank_channel`
(no pickle: a ``torch.save`` blob would be one); `follower_learner` builds the learner back.
"""

from __future__ import annotations

import io
import tarfile
import tempfile
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from distrl_core.learner.config import LearnerConfig
from distrl_core.learner.learner import Learner
from distrl_core.policy import load_policy, save_policy
from tasks.rank_channel import Message

__all__ = ["follower_learner", "learner_state"]

_OPTIMIZERS = ("actor_optimizer", "critic_optimizer")


def learner_state(learner: Learner) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(header, arrays) of everything a follower needs to take part in the next update."""
    buffer = io.BytesIO()
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(fileobj=buffer, mode="w") as tar:
        save_policy(learner.policy, Path(tmp) / "policy")
        tar.add(Path(tmp) / "policy", arcname="policy")
    arrays = {"policy": np.frombuffer(buffer.getvalue(), dtype=np.uint8)}
    optimizers: dict[str, Any] = {}
    for name in _OPTIMIZERS:
        state = getattr(learner, name).state_dict()
        scalars: dict[str, dict[str, float]] = {}
        for index, values in state["state"].items():
            for key, value in values.items():
                if isinstance(value, torch.Tensor):
                    arrays[f"{name}/{index}/{key}"] = value.detach().cpu().numpy()
                else:
                    scalars.setdefault(str(index), {})[key] = value
        optimizers[name] = {"param_groups": state["param_groups"], "scalars": scalars}
    stats = learner.task_stats
    header = {
        "kind": "init",
        "config": learner.config.to_dict(),
        "updates": learner.updates,
        "policy_version": learner.policy_version,
        "optimizers": optimizers,
        "task_stats": {
            "attempts": stats.attempts,
            "successes": stats.successes,
            "shortest": stats.shortest,
            "seen": list(stats._seen),
        },
    }
    return header, arrays


def follower_learner(init: Message, device: torch.device, rank: int) -> Learner:
    """A follower's learner from rank 0's `learner_state`, on `device`."""
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=io.BytesIO(init.arrays["policy"].tobytes())) as tar:
            tar.extractall(tmp, filter="data")
        policy = load_policy(Path(tmp) / "policy", device=str(device))
    # Followers never publish: no weight average to keep.
    config = replace(LearnerConfig(**init.header["config"]), weight_average_decay=0.0)
    learner = Learner(policy, config, policy_version=init.header["policy_version"])
    learner.updates = init.header["updates"]
    for name in _OPTIMIZERS:
        saved = init.header["optimizers"][name]
        state: dict[int, dict[str, Any]] = {}
        for key, value in init.arrays.items():
            owner, _, rest = key.partition("/")
            if owner == name:
                index, _, field = rest.partition("/")
                state.setdefault(int(index), {})[field] = torch.from_numpy(value.copy())
        for index, values in saved["scalars"].items():
            state.setdefault(int(index), {}).update(values)
        groups = [g | {"betas": tuple(g["betas"])} if "betas" in g else g for g in saved["param_groups"]]
        getattr(learner, name).load_state_dict({"state": state, "param_groups": groups})
    stats, saved_stats = learner.task_stats, init.header["task_stats"]
    stats.attempts, stats.successes = dict(saved_stats["attempts"]), dict(saved_stats["successes"])
    stats.shortest = dict(saved_stats["shortest"])
    stats._seen = OrderedDict.fromkeys(saved_stats["seen"])
    torch.manual_seed(config.seed + rank)  # word dropout: each rank its own masks
    return learner
