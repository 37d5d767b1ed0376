"""Fixtures: the default tokenizer once per session, fresh tiny policies, real SimDroid rows."""

from __future__ import annotations

import pytest
import torch

from distrl_core.envs.sim_env import SimDroidEnvConfig
from distrl_core.policy import Policy, PolicyConfig, default_tokenizer
from distrl_core.rollout import RolloutConfig, run_episodes

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tokenizer():
    return default_tokenizer()


@pytest.fixture
def make_policy(tokenizer):
    def make(**overrides) -> Policy:
        return Policy.create(PolicyConfig(device="cpu", **overrides), tokenizer=tokenizer)

    return make


@pytest.fixture(scope="session")
def episode_rows(tokenizer):
    """Rows of 8 real episodes (general and webshop, train split) from a fresh policy, version 3."""
    policy = Policy.create(PolicyConfig(device="cpu"), tokenizer=tokenizer)
    env = SimDroidEnvConfig(screenshots=False, ui_xml=False)
    tasks = [f"general-train-{i:04d}" for i in (0, 31, 62, 93, 124)] + [
        "webshop-train-0000",
        "webshop-train-0070",
        "webshop-train-0120",
    ]
    config = RolloutConfig(env=env, parallel_envs=8, seed=11, policy_version=3)
    return run_episodes(policy, tasks, config).rows
