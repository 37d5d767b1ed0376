"""Training refuses to run inside a caller's torch.autocast: autocast keeps its low-precision weight
copies until the outermost context exits, so updates inside one open context train stale weights
(the defect that held bench/gpu_pretrained.sh at 0.00 held-out on an H200)."""

from __future__ import annotations

import pytest
import torch

from distrl_core.learner import Learner, LearnerConfig, StepBatch
from simulators.warm_start import WarmStartConfig, supervised_warm_start


def _params(policy) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in policy.actor_parameters() + policy.critic_parameters()])


def test_autocast_forwards_stale_weights_inside_one_open_context():
    """Why the guard exists: torch's own behaviour. If this starts failing, torch stopped caching
    across steps, and the guard could be relaxed."""
    layer = torch.nn.Linear(4, 4)
    x = torch.ones(1, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        before = layer(x).float()
        with torch.no_grad():
            layer.weight.add_(1.0)  # what an optimiser step does
        inside = layer(x).float()
    after = layer(x)
    assert torch.equal(before, inside)  # the update is invisible inside the open context
    assert not torch.allclose(after, before, atol=1.0)  # and visible once it closed


def test_learner_update_inside_autocast_is_refused_and_changes_nothing(make_policy, episode_rows):
    policy = make_policy()
    learner = Learner(policy, LearnerConfig(critic_warmup_updates=0))
    weights = _params(policy)
    refused = r"Learner\.update was called inside torch\.autocast.*outside autocast"
    with pytest.raises(RuntimeError, match=refused), torch.autocast("cpu", dtype=torch.bfloat16):
        learner.update(StepBatch.from_rows(episode_rows))
    assert torch.equal(_params(policy), weights) and learner.updates == 0
    learner.update(StepBatch.from_rows(episode_rows))  # outside: it trains
    assert not torch.equal(_params(policy), weights)


def test_warm_start_inside_autocast_is_refused(make_policy, episode_rows):
    policy = make_policy()
    weights = _params(policy)
    refused = r"supervised_warm_start was called inside torch\.autocast"
    with pytest.raises(RuntimeError, match=refused), torch.autocast("cpu", dtype=torch.bfloat16):
        supervised_warm_start(policy, episode_rows, WarmStartConfig(updates=2, batch_size=2))
    assert torch.equal(_params(policy), weights)
