"""Fixtures of the encoder-base tests: the packaged all-MiniLM-L6-v2 (skipped where its package is
not installed) and a few expert steps of SimDroid's General train tasks."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def minilm_dir(tmp_path_factory):
    from distrl_core.policy.pretrained import MINILM_PACKAGE, ensure_minilm

    try:
        return ensure_minilm(tmp_path_factory.mktemp("models") / "minilm").path
    except FileNotFoundError as exc:
        pytest.skip(
            f"{exc} (the encoder base's package {MINILM_PACKAGE} is installed by `make pretrained-deps`)"
        )


@pytest.fixture(scope="module")
def steps():
    from distrl_core.envs.actions import format_action
    from distrl_core.policy.types import StepInput
    from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
    from simulators.simdroid.expert import expert_action
    from simulators.simdroid.tasks import load_tasks

    env = SimDroidEnv(SimDroidEnvConfig(screenshots=False))
    out = []
    for task in load_tasks("general", "train")[:6]:
        observation = env.reset(task, seed=0)
        action = expert_action(env, task)
        out.append(StepInput(task.instruction, observation.ui_text, format_action(action)))
    return out
