"""Token and candidate entropies against plain loops and torch.distributions; gradients stay finite."""

from __future__ import annotations

import math

import pytest
import reference_impl as ref
import torch

from distrl_core.algos import candidate_entropy, candidate_log_probs, token_entropy


@pytest.mark.parametrize("reduction", ["sum", "mean"])
@pytest.mark.parametrize("seed", range(10))
def test_token_entropy_matches_reference(seed, reduction):
    gen = torch.Generator().manual_seed(seed)
    logits = 2 * torch.randn(3, 4, 5, 11, generator=gen, dtype=torch.float64)  # (B, T, L, V)
    token_mask = (torch.arange(5) < torch.randint(0, 6, (3, 4, 1), generator=gen)).to(torch.float64)
    out = token_entropy(logits, token_mask, reduction=reduction)
    assert out.shape == (3, 4)
    expected = ref.token_entropy(logits.flatten(0, 1).tolist(), token_mask.flatten(0, 1).tolist(), reduction)
    torch.testing.assert_close(out.flatten(), torch.tensor(expected, dtype=torch.float64))


def test_token_entropy_agrees_with_torch_categorical_and_has_a_gradient():
    logits = torch.randn(6, 4, 9, generator=torch.Generator().manual_seed(1), requires_grad=True)
    token_mask = torch.ones(6, 4)
    out = token_entropy(logits, token_mask)
    expected = torch.distributions.Categorical(logits=logits).entropy().sum(-1)
    torch.testing.assert_close(out, expected)
    out.sum().backward()
    assert logits.grad is not None and float(logits.grad.abs().sum()) > 0


def test_token_entropy_with_masked_vocabulary_stays_finite():
    logits = torch.randn(2, 3, 7, generator=torch.Generator().manual_seed(2))
    logits[..., 4:] = float("-inf")
    logits = logits.requires_grad_(True)
    out = token_entropy(logits, torch.ones(2, 3))
    expected = torch.distributions.Categorical(logits=logits.detach()[..., :4]).entropy().sum(-1)
    torch.testing.assert_close(out.detach(), expected)
    out.sum().backward()
    assert bool(torch.isfinite(logits.grad).all())


def test_token_entropy_low_precision_is_upcast():
    logits = torch.randn(2, 3, 7).to(torch.bfloat16)
    assert token_entropy(logits, torch.ones(2, 3)).dtype == torch.float32


@pytest.mark.parametrize("seed", range(10))
def test_candidate_entropy_matches_reference(seed):
    gen = torch.Generator().manual_seed(seed)
    scores = 3 * torch.randn(5, 8, generator=gen, dtype=torch.float64)
    cand_mask = (torch.rand(5, 8, generator=gen) < 0.6).to(torch.float64)
    cand_mask[0] = 0.0  # a row with no candidate
    out = candidate_entropy(scores, cand_mask)
    expected = ref.candidate_entropy(scores.tolist(), cand_mask.tolist())
    torch.testing.assert_close(out, torch.tensor(expected, dtype=torch.float64))
    assert float(out[0]) == 0.0


def test_candidate_entropy_ignores_padded_scores_and_gradients_stay_finite():
    scores = torch.tensor([[1.0, 2.0, 0.5, float("nan")], [0.0, 0.0, 0.0, 0.0]], requires_grad=True)
    cand_mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    out = candidate_entropy(scores, cand_mask)
    value = out.detach()
    assert math.isclose(float(value[1]), math.log(2), rel_tol=1e-6)
    expected = torch.distributions.Categorical(logits=scores.detach()[0, :3]).entropy()
    assert math.isclose(float(value[0]), float(expected), rel_tol=1e-6)
    out.sum().backward()
    assert bool(torch.isfinite(scores.grad).all()) and float(scores.grad[0, 3]) == 0.0


def test_candidate_log_probs_normalise_over_valid_candidates():
    scores = torch.tensor([[1.0, 2.0, 3.0], [0.0, 5.0, 1.0]])
    cand_mask = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    log_p = candidate_log_probs(scores, cand_mask)
    assert math.isclose(float(log_p[0, :2].exp().sum()), 1.0, rel_tol=1e-6)
    assert bool(torch.isneginf(log_p[0, 2])) and bool(torch.isneginf(log_p[1]).all())
    # Scores given as already-normalised log-probs give the same entropy.
    full = torch.log_softmax(torch.tensor([[0.3, -1.0, 2.0]]), -1)
    torch.testing.assert_close(
        candidate_entropy(full, torch.ones(1, 3)), candidate_entropy(full * 1.0 + 4.0, torch.ones(1, 3))
    )
