"""Policy version directories <-> in-memory policies (the registry moves the directories)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from distrl_core.policy.config import PolicyConfig
from distrl_core.policy.model import Policy


def save_policy(policy: Policy, path: Path) -> Path:
    """Write a complete version directory (weights, heads, config)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "policy_config.json").write_text(json.dumps(policy.config.to_dict()))
    torch.save(policy.state_dict(), path / "state.pt")
    return path


def load_policy(path: Path) -> Policy:
    config = PolicyConfig.from_dict(json.loads((path / "policy_config.json").read_text()))
    policy = Policy.create(config)
    policy.load_state_dict(torch.load(path / "state.pt", map_location=policy.device, weights_only=True))
    return policy.eval()
