"""Policy version directories <-> in-memory policies (the registry moves the directories).

A version directory holds `policy_config.json` (how to rebuild the model), `base.json` (the base
model's kind, pointer and content hash), `state.pt` (trainable weights: the whole tiny model or the
LoRA-wrapped model, and the heads) and, for pretrained bases, the tokenizer. Loading rebuilds the
base from its pointer and refuses it when its hash differs from the one recorded: an adapter on
the wrong base would act as garbage without any error.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import torch

from distrl_core.policy.config import PolicyConfig
from distrl_core.policy.model import Policy

_create_lock = threading.Lock()


class BaseModelMismatch(RuntimeError):
    """The version was trained on another base model than the one found now."""


def save_policy(policy: Policy, path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "policy_config.json").write_text(json.dumps(policy.config.to_dict(), indent=1))
    base = {"kind": policy.base.kind, "pointer": policy.base.pointer, "hash": policy.base.hash}
    (path / "base.json").write_text(json.dumps(base, indent=1, default=str))
    torch.save(policy.state_dict(), path / "state.pt")
    if policy.base.kind == "pretrained" and hasattr(policy.tokenizer, "save_pretrained"):
        policy.tokenizer.save_pretrained(path / "tokenizer")
    return path


def load_policy(path: Path) -> Policy:
    config = PolicyConfig.from_dict(json.loads((path / "policy_config.json").read_text()))
    recorded = json.loads((path / "base.json").read_text())
    with _create_lock:  # building a model seeds torch's global RNG: not safe from several threads at once
        policy = Policy.create(config)
    if recorded["kind"] == "tiny":
        # A from-config base has no files to hash; state.pt holds every weight, so the config must match.
        same = json.loads(json.dumps(policy.base.pointer, default=str)) == recorded["pointer"]
    else:
        same = policy.base.hash == recorded["hash"]
    if not same:
        raise BaseModelMismatch(
            f"policy version {path} was trained on base {recorded['pointer']!r} with hash {recorded['hash'][:16]}…, "
            f"but the base found now hashes to {policy.base.hash[:16]}…; point PolicyConfig.base at the original "
            "checkpoint (same files) or retrain from this base"
        )
    policy.load_state_dict(torch.load(path / "state.pt", map_location=policy.device, weights_only=True))
    return policy.eval()
