"""A-RIDE improves held-out success over its warm start (small setting, fixed seed, ~2 minutes)."""

from __future__ import annotations

import pytest

from distrl_core.envs.simdroid.tasks import load_tasks
from distrl_core.learner import (
    Learner,
    LearnerConfig,
    LoopConfig,
    WarmStartConfig,
    collect_demonstrations,
    evaluate_success,
    supervised_warm_start,
    train_rounds,
)


@pytest.mark.slow
def test_aride_raises_heldout_success_over_the_warm_start(make_policy):
    policy = make_policy()
    warm = WarmStartConfig(family="general", noise=0.3, updates=20, seed=0)
    supervised_warm_start(policy, collect_demonstrations(warm).rows, warm)
    loop = LoopConfig(family="general", rounds=16, episodes_per_round=32, updates_per_round=8, seed=0)
    start = evaluate_success(policy, load_tasks("general", "test"), loop.env)
    assert start < 0.5  # a weak warm start (20 SFT updates on noisy demos), far from what RL reaches

    rounds = train_rounds(Learner(policy, LearnerConfig(algorithm="aride", seed=0)), loop)

    assert rounds[0].heldout_success == start
    late = [r.heldout_success for r in rounds[-3:]]
    assert sum(late) / len(late) > start + 0.05, [r.heldout_success for r in rounds]
    assert rounds[-1].metrics["rho_mean"] > 0  # it trained off-policy data from earlier versions
    assert rounds[-1].metrics["policy_lag_max"] >= 1
