"""The scripted expert: solves every train and test task, copes with distractors, and its noise
makes it an imperfect but reproducible demonstrator."""

from __future__ import annotations

import random

import pytest

from distrl_core.envs.actions import Action, ActionKind
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from simulators.simdroid import SimDroidConfig, load_tasks
from simulators.simdroid.expert import expert_action


def _text_only_env(distractor_prob: float = 0.0) -> SimDroidEnv:
    config = SimDroidEnvConfig(
        device=SimDroidConfig(distractor_prob=distractor_prob), screenshots=False, ui_xml=False
    )
    return SimDroidEnv(config)


def run_episode(env: SimDroidEnv, task, noise: float = 0.0, rng: random.Random | None = None, seed: int = 0):
    env.reset(task, seed=seed)
    actions = []
    while True:
        action = expert_action(env, env.task, noise=noise, rng=rng)
        actions.append(str(action))
        result = env.step(action)
        if result.done:
            return result, actions


@pytest.mark.parametrize("split", ["train", "test"])
def test_noiseless_expert_solves_every_task_within_the_horizon(split: str) -> None:
    env = _text_only_env()
    failures, lengths = [], []
    for task in load_tasks(split=split):
        result, actions = run_episode(env, task)
        lengths.append(len(actions))
        if not (result.info.success and result.reward == 1.0):
            failures.append((task.task_id, task.instruction, actions))
    assert failures == []
    assert max(lengths) <= 10  # well inside the Web Shopping horizon of 20


def test_expert_dismisses_distractors_and_still_solves_tasks() -> None:
    tasks = load_tasks(split="train")[::5]
    calm = [run_episode(_text_only_env(), task, seed=i) for i, task in enumerate(tasks)]
    env = _text_only_env(distractor_prob=0.3)
    busy = [run_episode(env, task, seed=i) for i, task in enumerate(tasks)]
    # the dialogs cost extra steps...
    assert (
        sum(len(actions) for _, actions in busy) > sum(len(actions) for _, actions in calm) + len(tasks) // 4
    )
    # ...and a few general tasks could run out of their 10 steps when several pop up in a row
    assert sum(result.info.success for result, _ in busy) / len(busy) >= 0.9


def test_noisy_expert_is_imperfect_and_reproducible() -> None:
    env = _text_only_env()
    tasks = load_tasks("general", "train")[::3]

    def success_rate_and_actions(seed: int) -> tuple[float, list[list[str]]]:
        rng = random.Random(seed)
        results = [run_episode(env, task, noise=0.5, rng=rng) for task in tasks]
        return sum(r.info.success for r, _ in results) / len(results), [a for _, a in results]

    rate, actions = success_rate_and_actions(1)
    assert 0.0 < rate < 1.0
    assert success_rate_and_actions(1) == (rate, actions)
    assert success_rate_and_actions(2)[1] != actions
    noisy = {a for episode in actions for a in episode}
    assert any(a.startswith("swipe(") for a in noisy) and any(a.startswith("type(") for a in noisy)


def test_expert_says_complete_once_the_task_is_solved() -> None:
    env = SimDroidEnv(SimDroidEnvConfig(end_on_success=False, screenshots=False))
    task = next(t for t in load_tasks("general", "train") if t.kind == "open_app")
    env.reset(task)
    while (action := expert_action(env, task)).kind is not ActionKind.STATUS:
        env.step(action)
    assert action == Action.complete()
    result = env.step(action)
    assert result.done and result.reward == 1.0


def test_noise_arguments_are_checked() -> None:
    env = _text_only_env()
    task = load_tasks()[0]
    env.reset(task)
    with pytest.raises(ValueError, match="probability"):
        expert_action(env, task, noise=1.5)
    with pytest.raises(ValueError, match="rng="):
        expert_action(env, task, noise=0.1)
