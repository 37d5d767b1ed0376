"""The MobileRL-style options and decoupled PPO wired into Learner.update and the local loop."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from distrl_core.learner import Learner, LearnerConfig, StepBatch
from distrl_core.learner.losses import DecoupledPPOLoss, make_loss
from distrl_core.learner.losses.decoupled_ppo import DecoupledPPOInputs
from distrl_core.learner.task_stats import TaskStats


def _tasks(episode_rows):
    """The 8 episodes: task "hard" (episodes 0-3, only episode 0 succeeds) and "easy" (4-7, all do).
    The success reward sits on each episode's last step."""
    order = list(dict.fromkeys(r["episode_id"] for r in episode_rows))
    rows = []
    for r in episode_rows:
        i = order.index(r["episode_id"])
        won = i == 0 or i >= 4
        task = "hard" if i < 4 else "easy"
        rows.append(dict(r, task_id=task, episode_success=won, reward=float(won and r["done"])))
    return rows


def test_task_stats_count_each_episode_once_and_reset_only_unsolved_tasks():
    stats = TaskStats()
    stats.observe(["e1", "e2", "e3"], ["a", "a", "b"], [1.0, 0.0, 0.0], [5, 3, 4])
    stats.observe(["e1", "e4"], ["a", "a"], [1.0, 1.0], [5, 2])  # e1 again: not counted twice
    assert stats.attempts == {"a": 3, "b": 1} and stats.successes == {"a": 2}
    assert stats.shortest == {"a": 2}  # the shortest success, not the shortest attempt (e2: 3 failed)
    assert stats.success_rates(["a", "b", "new"]).tolist() == pytest.approx([3 / 5, 1 / 3, 1 / 2])
    assert stats.reset_unsolved() == 1 and stats.attempts == {"a": 3}


def test_defaults_leave_priorities_and_rewards_alone(make_policy, episode_rows):
    learner = Learner(make_policy(), LearnerConfig(algorithm="gigpo"))
    metrics, priorities = learner.update(StepBatch.from_rows(_tasks(episode_rows)))
    assert np.array_equal(priorities, np.ones(8)) and "priority_multiplier_mean" not in metrics
    assert learner.task_stats.attempts == {}


def test_positive_replay_raises_the_priority_of_the_hard_tasks_success(make_policy, episode_rows):
    config = LearnerConfig(algorithm="gigpo", positive_replay_strength=2.0)
    _, priorities = Learner(make_policy(), config).update(StepBatch.from_rows(_tasks(episode_rows)))
    # hard: p̂ = (1 + 1)/(4 + 2) → 1 + 2·(2/3); easy: p̂ = 5/6 → 1 + 2·(1/6); failures stay at 1.
    assert priorities[0] == pytest.approx(1 + 2 * (2 / 3))
    assert priorities[1:4].tolist() == [1.0, 1.0, 1.0]
    assert priorities[4:] == pytest.approx([1 + 2 / 6] * 4)


def test_failure_curriculum_weights_never_solved_tasks_down_and_resets_them(make_policy, episode_rows):
    rows = [dict(r, task_id="never" if r["task_id"] == "hard" else "easy") for r in _tasks(episode_rows)]
    rows = [dict(r, episode_success=False, reward=0.0) if r["task_id"] == "never" else r for r in rows]
    config = LearnerConfig(
        algorithm="gigpo", failure_curriculum_attempts=4, failure_curriculum_floor=0.25,
        failure_curriculum_reset_updates=2,
    )  # fmt: skip
    learner = Learner(make_policy(), config)
    metrics, priorities = learner.update(StepBatch.from_rows(rows))
    assert priorities[:4].tolist() == [0.25] * 4 and priorities[4:].tolist() == [1.0] * 4
    assert learner.task_stats.task_weights(["never", "easy"], config).tolist() == [0.25, 1.0]
    metrics, _ = learner.update(StepBatch.from_rows(rows))  # the 2nd update resets the counts
    assert metrics["curriculum_tasks_reset"] == 1.0
    assert learner.task_stats.task_weights(["never", "easy"], config).tolist() == [1.0, 1.0]


def test_shortest_path_scales_the_longer_successes_reward(make_policy, episode_rows):
    rows = _tasks(episode_rows)
    batch = StepBatch.from_rows(rows)
    config = LearnerConfig(shortest_path_exponent=1.0)
    learner = Learner(make_policy(), config)
    learner.task_stats.observe_batch(batch)
    shaped = learner.task_stats.shaped_rewards(batch, config)
    lengths = batch.mask.sum(dim=1)
    easy = [b for b in range(4, 8)]
    shortest = int(min(lengths[b] for b in easy))
    for b in easy:
        n = int(lengths[b])
        assert float(shaped.rewards[b, n - 1]) == pytest.approx(shortest / n)
    assert torch.equal(shaped.rewards[1:4], batch.rewards[1:4])  # failures: unchanged
    windows = StepBatch.from_rows([dict(r, step=r["step"] + 1) for r in rows])
    with pytest.raises(ValueError, match="window=None"):
        learner.task_stats.shaped_rewards(windows, config)


@pytest.mark.parametrize("proximal", ["update_start", "average"])
def test_decoupled_ppo_trains_and_reports_its_behaviour_weights(make_policy, episode_rows, proximal):
    config = LearnerConfig(algorithm="decoupled_ppo", critic_warmup_updates=0, proximal_policy=proximal)
    learner = Learner(make_policy(), config)
    batch = StepBatch.from_rows(_tasks(episode_rows))
    before = torch.cat([p.detach().flatten().clone() for p in learner.policy.actor_parameters()])
    for _ in range(2):
        metrics, priorities = learner.update(batch)
    assert priorities.shape == (8,) and np.all(priorities > 0)  # DPER's, as A-RIDE's
    assert not np.allclose(priorities, priorities[0])
    assert 0 < metrics["behaviour_weight_mean"] <= config.proximal_weight_max
    assert metrics["critic_loss"] > 0 and np.isfinite(metrics["actor_loss"])
    after = torch.cat([p.detach().flatten() for p in learner.policy.actor_parameters()])
    assert not torch.equal(before, after)
    if proximal == "update_start":  # r = 1 at the step: nothing is clipped
        assert metrics["clip_fraction"] == 0.0


@pytest.mark.parametrize("positive_only", [True, False])
def test_decoupled_ppo_pushes_no_action_down_with_positive_advantages_only(
    make_policy, episode_rows, positive_only
):
    # Without entropy and penalties, d loss / d log π = −w·A·r: ≤ 0 everywhere iff every A ≥ 0.
    batch = StepBatch.from_rows(_tasks(episode_rows))
    config = LearnerConfig(
        algorithm="decoupled_ppo", positive_advantages_only=positive_only,
        entropy_coef=0.0, invalid_penalty=0.0, repeat_penalty=0.0,
    )  # fmt: skip
    with torch.no_grad():
        out = make_policy().evaluate(batch)
    logp = out.logp.clone().requires_grad_(True)
    objective = make_loss(config)(
        dataclasses.replace(out, logp=logp), batch, batch.mask, DecoupledPPOInputs(logp.detach())
    )
    objective.actor_loss.backward()
    grad = logp.grad[batch.mask & out.known]
    assert float(grad.min()) < 0  # successes' actions are pushed up either way
    if positive_only:
        assert float(grad.max()) == 0.0 and float(objective.stats["advantage_mean"]) > 0
    else:
        assert float(grad.max()) > 0  # failures' actions pushed down


def test_the_learner_task_refuses_windows_with_the_shortest_path_reward():
    from tasks.learner import LearnerParams

    with pytest.raises(ValueError, match="shortest_path_exponent"):
        LearnerParams(window=4, learner_config={"shortest_path_exponent": 1.0})
    LearnerParams(window=4, learner_config={"positive_replay_strength": 1.0})  # no lengths read


def test_the_loop_acts_with_weights_k_versions_old_and_restores_the_learners(make_policy):
    from simulators.local_loop import _Published

    learner = Learner(make_policy(), LearnerConfig(weight_average_decay=0.0))
    parameters = learner.policy.actor_parameters()
    published = _Published(learner, lag=2)  # remembers version 0
    seen = {0: torch.cat([p.detach().flatten().clone() for p in parameters])}
    for version in (1, 2, 3):
        with torch.no_grad():
            for p in parameters:
                p.add_(0.01 * version)
        learner.policy_version = version
        published.remember()
        seen[version] = torch.cat([p.detach().flatten().clone() for p in parameters])
    with published.acting() as (policy, version):
        assert version == 1
        assert torch.equal(torch.cat([p.detach().flatten() for p in policy.actor_parameters()]), seen[1])
    assert torch.equal(torch.cat([p.detach().flatten() for p in parameters]), seen[3])


def test_group_tasks_follow_the_curriculum_probabilities():
    from distrl_core.learner.groups import group_tasks
    from simulators.simdroid.tasks import load_tasks

    tasks = load_tasks("general", "train")[:5]
    probabilities = np.array([0.0, 0.0, 1.0, 0.0, 0.0])
    picked, _ = group_tasks(tasks, 16, 4, np.random.default_rng(0), probabilities)
    assert {t.task_id for t in picked} == {tasks[2].task_id}


def test_decoupled_ppo_on_retrace_shares_aride_s_targets_and_priorities(make_policy, episode_rows):
    # The option swaps only the estimator: critic loss, advantages and priorities are A-RIDE's.
    batch = StepBatch.from_rows(_tasks(episode_rows))
    with torch.no_grad():
        out = make_policy().evaluate(batch)
    aride = make_loss(LearnerConfig())(out, batch, batch.mask, None)
    mixed, plain = (
        DecoupledPPOLoss.from_config(LearnerConfig(algorithm="decoupled_ppo", decoupled_retrace=flag))(
            out, batch, batch.mask, DecoupledPPOInputs(out.logp)
        )
        for flag in (True, False)
    )
    assert torch.allclose(mixed.critic_loss, aride.critic_loss)
    assert torch.allclose(mixed.priorities, aride.priorities)
    assert not torch.allclose(aride.priorities, torch.ones_like(aride.priorities))
    assert torch.allclose(mixed.stats["advantage_mean"], aride.stats["advantage_mean"])
    assert torch.equal(plain.priorities, torch.ones_like(plain.priorities))
    assert not torch.allclose(plain.critic_loss, aride.critic_loss)
