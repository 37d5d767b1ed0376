"""Given a seed, the warm start is exact on a re-run (weights, demonstrations, batch order), and a
different seed gives a different run: what `distrl demo --seed N` relies on."""

from __future__ import annotations

import torch

from distrl_core.policy import Policy, PolicyConfig
from distrl_core.policy.config import TinyModelConfig
from simulators.simdroid.tasks import load_tasks
from simulators.warm_start import WarmStartConfig, collect_demonstrations, supervised_warm_start


def _warm_start(tokenizer, seed: int) -> tuple[torch.Tensor, list[str]]:
    policy = Policy.create(
        PolicyConfig(device="cpu", seed=seed, tiny=TinyModelConfig(seed=seed)), tokenizer=tokenizer
    )
    config = WarmStartConfig(family="general", updates=3, batch_size=4, seed=seed)
    demos = collect_demonstrations(config, tasks=load_tasks("general", "train")[:12])
    supervised_warm_start(policy, demos.rows, config)
    weights = torch.cat([p.detach().flatten() for p in policy.actor_parameters()])
    return weights, [row["action"] for row in demos.rows]


def test_warm_start_is_exact_for_a_seed_and_differs_across_seeds(tokenizer):
    weights, actions = _warm_start(tokenizer, seed=5)
    again, actions_again = _warm_start(tokenizer, seed=5)
    other, other_actions = _warm_start(tokenizer, seed=6)
    assert actions == actions_again and torch.equal(weights, again)
    assert actions != other_actions and not torch.equal(weights, other)
