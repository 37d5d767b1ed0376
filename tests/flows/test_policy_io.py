from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from distrl_core.envs.sim_env import SimDroidEnv, SimDroidEnvConfig
from distrl_core.policy.config import PolicyConfig
from distrl_core.policy.model import Policy
from tasks.policy_io import BaseModelMismatch, load_policy, save_policy


def test_version_round_trip_acts_identically(tmp_path: Path) -> None:
    policy = Policy.create(PolicyConfig())
    with torch.no_grad():
        for parameter in policy.actor_parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))  # trained weights, not the seed's
    save_policy(policy, tmp_path / "v")
    loaded = load_policy(tmp_path / "v")
    env = SimDroidEnv(SimDroidEnvConfig(screenshots=False, ui_xml=False))
    observation = env.reset(None, seed=3)
    a = policy.eval().act([observation], greedy=True)[0]
    b = loaded.act([observation], greedy=True)[0]
    assert a.raw_text == b.raw_text and a.logprob == pytest.approx(b.logprob, abs=1e-5)
    assert json.loads((tmp_path / "v" / "base.json").read_text())["hash"] == policy.base.hash


def test_loading_on_a_different_base_fails_clearly(tmp_path: Path) -> None:
    save_policy(Policy.create(PolicyConfig()), tmp_path / "v")
    base = json.loads((tmp_path / "v" / "base.json").read_text())
    base["pointer"]["hidden_size"] *= 2  # trained on another base
    (tmp_path / "v" / "base.json").write_text(json.dumps(base))
    with pytest.raises(BaseModelMismatch, match="hidden_size"):
        load_policy(tmp_path / "v")
