"""gigpo's groups in the in-memory loop: grouped collection under one seed, whole-group batches."""

from __future__ import annotations

import numpy as np
import pytest

from distrl_core.learner import Learner, LearnerConfig
from distrl_core.learner.groups import group_tasks, sample_groups
from distrl_core.policy.config import TinyModelConfig
from simulators.local_loop import LoopConfig, train_rounds
from simulators.rollout import RolloutConfig, run_episodes
from simulators.sim_env import SimDroidEnvConfig
from simulators.simdroid.tasks import load_tasks


def test_group_tasks_repeat_one_task_under_one_seed():
    tasks = load_tasks("general", "train")
    picked, seeds = group_tasks(tasks, 34, 4, np.random.default_rng(0))
    assert len(picked) == len(seeds) == 32  # 8 whole groups; the 2 left over are not collected
    groups = [picked[i : i + 4] for i in range(0, 32, 4)]
    assert all(len({t.task_id for t in g}) == 1 for g in groups)
    assert len({g[0].task_id for g in groups}) == 8  # distinct tasks
    assert all(len(set(seeds[i : i + 4])) == 1 for i in range(0, 32, 4))
    with pytest.raises(ValueError, match="group needs >= 2"):
        group_tasks(tasks, 32, 1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="below group_size"):
        group_tasks(tasks, 3, 4, np.random.default_rng(0))


def _episode(task: str, version: int, n: int) -> list[dict]:
    return [
        {"task_id": task, "policy_version": version, "episode_id": f"{task}{version}-{n}", "step": s}
        for s in range(2)
    ]


def test_sample_groups_draws_whole_groups_uniformly():
    # Groups: (a, 0) x3, (a, 1) x2 (same task, newer policy: another group), (b, 0) x1.
    episodes = (
        [_episode("a", 0, i) for i in range(3)]
        + [_episode("a", 1, i) for i in range(2)]
        + [_episode("b", 0, 0)]
    )
    counts = np.zeros(len(episodes))
    rng = np.random.default_rng(1)
    for _ in range(600):
        picks, rows, weights = sample_groups(episodes, 2, rng)
        drawn = {(episodes[i][0]["task_id"], episodes[i][0]["policy_version"]) for i in picks}
        assert len(drawn) == 2 and np.array_equal(weights, np.ones(len(picks)))
        for key in drawn:  # every episode of a drawn group comes along
            assert (
                sum(1 for i in picks if (episodes[i][0]["task_id"], episodes[i][0]["policy_version"]) == key)
                == {("a", 0): 3, ("a", 1): 2, ("b", 0): 1}[key]
            )
        assert [r["sample_idx"] for r in rows] == [i for i in range(len(picks)) for _ in range(2)]
        counts[picks] += 1
    # Uniform over the 3 groups: each is in 2 of 3 draws, whatever its size.
    assert np.allclose(counts / 600, 2 / 3, atol=0.06)
    picks, _, _ = sample_groups(episodes, 10, rng)
    assert sorted(picks.tolist()) == list(range(6))  # fewer groups than asked: all of them


def test_reset_seeds_make_a_group_start_and_unfold_alike(make_policy):
    # Pop-ups follow page changes: this untrained policy's greedy taps change pages (some initial
    # weights only ever tap where nothing changes, and then no seed can show).
    policy = make_policy(tiny=TinyModelConfig(seed=1))
    env = SimDroidEnvConfig(screenshots=False, ui_xml=False)
    env.device.distractor_prob = 0.5  # the seed decides the pop-ups: different seeds, different screens
    tasks = load_tasks("general", "train")[:1] * 4
    config = RolloutConfig(env=env, greedy=True, seed=5, parallel_envs=4)
    grouped = run_episodes(policy, tasks, config, reset_seeds=[99] * 4)
    screens = {}
    for row in grouped.rows:
        screens.setdefault(row["episode_id"], []).append(row["observation_text"])
    assert len({tuple(s) for s in screens.values()}) == 1  # greedy, same seed: one trajectory four times
    free = run_episodes(policy, tasks, config)
    free_screens = {}
    for row in free.rows:
        free_screens.setdefault(row["episode_id"], []).append(row["observation_text"])
    assert len({tuple(s) for s in free_screens.values()}) > 1  # without: the seeds differ, and so do they
    assert [e.episode_id for e in free.episodes] == [e.episode_id for e in grouped.episodes]
    with pytest.raises(ValueError, match="one per task"):
        run_episodes(policy, tasks, config, reset_seeds=[1])


def test_a_gigpo_round_trains_on_groups(make_policy):
    loop = LoopConfig(
        rounds=1, episodes_per_round=8, group_size=4, updates_per_round=2, batch_size=8, min_replay=8,
        eval_tasks=2, parallel_envs=8,
    )  # fmt: skip
    learner = Learner(make_policy(), LearnerConfig(algorithm="gigpo"))
    rounds = train_rounds(learner, loop)
    assert rounds[-1].episodes == 8 and learner.updates == 2
    metrics = rounds[-1].metrics
    assert metrics["trajectories"] == 8.0  # both groups, whole
    assert metrics["group_singleton_step_fraction"] < 1.0  # the groups' first screens are shared
