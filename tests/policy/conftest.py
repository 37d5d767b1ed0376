"""Shared fixtures: the default word tokenizer is built once per session (a couple of seconds)."""

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
def sim_rows(tokenizer):
    """Step rows of a few real SimDroid episodes played by a fresh (random-weight) policy."""
    policy = Policy.create(PolicyConfig(device="cpu"), tokenizer=tokenizer)
    env = SimDroidEnvConfig(screenshots=False, ui_xml=False)
    tasks = ["general-train-0000", "general-train-0040", "webshop-train-0100", "general-test-0060"]
    return run_episodes(policy, tasks, RolloutConfig(env=env, parallel_envs=4, seed=3)).rows
