"""The scoring policy can express every step of the scripted expert's plans.

If an expert action were missing from the candidate set, the policy could never imitate or
discover that step (the set_alarm diagnosis in docs/performance.md checked this first)."""

from __future__ import annotations

import pytest

from distrl_core.envs.actions import format_action
from distrl_core.policy.candidates import build_candidates
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from simulators.simdroid.expert import expert_action
from simulators.simdroid.tasks import load_tasks


@pytest.mark.parametrize("family", ["general", "webshop"])
@pytest.mark.parametrize("split", ["train", "test"])
def test_every_expert_action_is_a_candidate_and_fits_the_horizon(family: str, split: str) -> None:
    env = SimDroidEnv(SimDroidEnvConfig(family=family, screenshots=False, ui_xml=False))
    missing = []
    for task in load_tasks(family, split):
        observation = env.reset(task, seed=1)  # distractor dialogs on, as in training
        for _ in range(task.horizon):
            action = format_action(expert_action(env, task))
            offered = build_candidates(
                task.instruction, observation.ui_text, screen_size=observation.screen_size
            )
            if action not in {c.action_text for c in offered}:
                missing.append((task.task_id, action, observation.ui_text))
            result = env.step(action)
            observation = result.observation
            if result.done:
                break
        assert result.info.success, f"the expert did not solve {task.task_id} within its horizon"
    assert not missing, f"expert actions the policy cannot choose: {missing[:3]}"
