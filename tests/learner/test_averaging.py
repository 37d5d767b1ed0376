"""Weight averaging: the EMA against a plain loop, exact restore of the raw weights, the learner's use."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from distrl_core.learner import Learner, LearnerConfig, StepBatch
from distrl_core.learner.averaging import WeightAverage, averaging_decay


def test_average_matches_a_plain_loop_reference():
    torch.manual_seed(0)
    layer = nn.Linear(3, 2).double()
    params = list(layer.parameters())
    average = WeightAverage(params + params[:1], decay=0.9)  # a parameter given twice counts once
    assert len(average.parameters) == 2
    reference = [[float(x) for x in p.detach().flatten()] for p in params]
    for step in range(25):
        with torch.no_grad():
            for p in params:
                p.add_(torch.randn_like(p))
        average.update()
        decay = min(0.9, (1 + step) / (10 + step))
        for ref, p in zip(reference, params, strict=True):
            current = [float(x) for x in p.detach().flatten()]
            for i, value in enumerate(current):
                ref[i] = decay * ref[i] + (1 - decay) * value
    for ref, shadow in zip(reference, average.shadow, strict=True):
        assert np.allclose(ref, shadow.flatten().numpy(), rtol=0, atol=1e-12)


def test_decay_ramps_up_to_its_setting():
    assert averaging_decay(0.99, 0) == pytest.approx(0.1)
    assert averaging_decay(0.99, 10) == pytest.approx(11 / 20)
    assert averaging_decay(0.99, 10_000) == 0.99


def test_swapped_in_restores_the_raw_weights_bit_for_bit():
    layer = nn.Linear(4, 4)
    average = WeightAverage(list(layer.parameters()), decay=0.5)
    with torch.no_grad():
        layer.weight.mul_(3.0)
    raw = layer.weight.detach().clone()
    with average.swapped_in():
        assert not torch.equal(layer.weight, raw)
        assert torch.equal(layer.weight, average.shadow[0])
    assert torch.equal(layer.weight, raw)


def test_bad_decay_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="0 turns averaging off"):
        WeightAverage([nn.Parameter(torch.zeros(1))], decay=1.0)
    with pytest.raises(ValueError, match="weight_average_decay"):
        LearnerConfig(weight_average_decay=1.5)


def test_learner_publishes_the_average_and_trains_the_raw_weights(make_policy, episode_rows):
    policy = make_policy()
    learner = Learner(policy, LearnerConfig(critic_warmup_updates=0, seed=3, weight_average_decay=0.9))
    start = [p.detach().clone() for p in policy.actor_parameters()]
    for _ in range(3):
        learner.update(StepBatch.from_rows(episode_rows, np.ones(8)))
    raw = [p.detach().clone() for p in policy.actor_parameters()]
    with learner.averaged() as published:
        averaged = [p.detach().clone() for p in published.actor_parameters()]
    assert all(
        torch.equal(a, b) for a, b in zip(raw, [p.detach() for p in policy.actor_parameters()], strict=True)
    )
    moved_raw = sum(float((r - s).abs().sum()) for r, s in zip(raw, start, strict=True))
    moved_avg = sum(float((a - s).abs().sum()) for a, s in zip(averaged, start, strict=True))
    assert 0 < moved_avg < moved_raw  # between the start and the raw weights

    off = Learner(make_policy(), LearnerConfig(critic_warmup_updates=0, weight_average_decay=0))
    off.update(StepBatch.from_rows(episode_rows, np.ones(8)))
    with off.averaged() as published:
        assert published is off.policy and off.average is None
