"""DPER priorities, prioritized-replay IS weights and the linear schedule."""

from __future__ import annotations

import math

import pytest
import reference_impl as ref
import torch
from random_batches import random_step_batch, rows

from distrl_core.algos import dper_priority, importance_weights, linear_schedule


@pytest.mark.parametrize("seed", range(20))
def test_dper_priority_matches_reference_and_ignores_padding(seed):
    batch = random_step_batch(seed, 6, 7)  # NaN padding
    entropy = torch.where(
        batch.mask > 0, batch.rho.log().abs(), torch.tensor(float("nan"), dtype=torch.float64)
    )
    params = dict(w1=1.0, w2=0.5, w3=0.25, eps=1e-3)
    out = dper_priority(batch.values, batch.rho, entropy, batch.mask, **params)
    expected = ref.dper_priority(
        rows(batch.values), rows(batch.rho), rows(entropy), rows(batch.mask), **params
    )
    torch.testing.assert_close(out, torch.tensor(expected, dtype=torch.float64))
    for b, n in enumerate(batch.lengths):
        if n == 0:
            assert float(out[b]) == params["eps"]


def test_dper_priority_formula_on_a_hand_example():
    td = torch.tensor([[1.0, -3.0, 99.0]])
    rho_bar = torch.tensor([[0.5, 1.0, 99.0]])
    entropy = torch.tensor([[2.0, 0.0, 99.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    out = dper_priority(td, rho_bar, entropy, mask, w1=1.0, w2=2.0, w3=3.0, eps=0.01)
    assert math.isclose(float(out[0]), 1.0 * 2.0 + 2.0 * 0.75 + 3.0 * 1.0 + 0.01, rel_tol=1e-6)


def test_dper_priority_rejects_a_zero_epsilon():
    with pytest.raises(ValueError, match="eps"):
        dper_priority(
            torch.zeros(1, 1), torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1), w1=1, w2=1, w3=1, eps=0
        )


@pytest.mark.parametrize("seed", range(15))
def test_importance_weights_match_formula_with_max_one(seed):
    gen = torch.Generator().manual_seed(seed)
    probabilities = torch.rand(16, generator=gen, dtype=torch.float64) * 1e-3 + 1e-6
    beta = float(torch.rand(1, generator=gen))
    out = importance_weights(probabilities, 5000, beta)
    torch.testing.assert_close(
        out, torch.tensor(ref.importance_weights(probabilities.tolist(), 5000, beta), dtype=torch.float64)
    )
    assert math.isclose(float(out.max()), 1.0) and bool((out > 0).all())
    # The rarest sample gets the largest weight.
    assert int(out.argmax()) == int(probabilities.argmin())


def test_importance_weights_beta_zero_and_global_normalisation():
    probabilities = torch.tensor([0.1, 0.2, 0.4])
    assert bool((importance_weights(probabilities, 10, 0.0) == 1).all())
    out = importance_weights(probabilities, 10, 1.0, min_probability=0.05)
    torch.testing.assert_close(out, torch.tensor([0.5, 0.25, 0.125]))
    with pytest.raises(ValueError, match="min_probability"):
        importance_weights(probabilities, 10, 1.0, min_probability=0.2)
    with pytest.raises(ValueError, match="probabilities"):
        importance_weights(torch.tensor([0.0, 0.5]), 10, 0.5)
    with pytest.raises(ValueError, match="beta"):
        importance_weights(probabilities, 10, 1.5)


def test_linear_schedule_anneals_and_clamps():
    assert linear_schedule(0.4, 1.0, 100, 0) == 0.4
    assert math.isclose(linear_schedule(0.4, 1.0, 100, 50), 0.7)
    assert linear_schedule(0.4, 1.0, 100, 100) == 1.0
    assert linear_schedule(0.4, 1.0, 100, 1000) == 1.0
    assert linear_schedule(0.4, 1.0, 100, -5) == 0.4
    assert linear_schedule(0.4, 1.0, 0, 3) == 1.0
