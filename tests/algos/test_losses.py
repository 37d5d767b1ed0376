"""Actor and critic losses against plain-loop references, and where their gradients flow."""

from __future__ import annotations

import math

import pytest
import reference_impl as ref
import torch
from random_batches import rows

from distrl_core.algos import ActorTerms, critic_loss, policy_loss, trajectory_critic_loss


def ragged_mask(gen: torch.Generator, batch: int, horizon: int) -> torch.Tensor:
    lengths = torch.randint(0, horizon + 1, (batch, 1), generator=gen)
    lengths[0] = horizon
    return (torch.arange(horizon) < lengths).to(torch.float64)


def random_policy_inputs(seed: int, batch: int = 5, horizon: int = 7):
    gen = torch.Generator().manual_seed(seed)
    mask = ragged_mask(gen, batch, horizon)
    real = mask > 0
    nan = torch.tensor(float("nan"), dtype=torch.float64)
    return dict(
        logp=torch.where(real, -3 * torch.rand(batch, horizon, generator=gen, dtype=torch.float64), nan),
        adv=torch.where(real, torch.randn(batch, horizon, generator=gen, dtype=torch.float64), nan),
        weights=torch.rand(batch, generator=gen, dtype=torch.float64) + 0.1,
        entropy=torch.where(real, torch.rand(batch, horizon, generator=gen, dtype=torch.float64), nan),
        invalid=(torch.rand(batch, horizon, generator=gen) < 0.3).to(torch.float64),
        repeat=(torch.rand(batch, horizon, generator=gen) < 0.3).to(torch.float64),
        mask=mask,
    )


@pytest.mark.parametrize("seed", range(25))
def test_policy_loss_matches_reference(seed):
    x = random_policy_inputs(seed)
    coefs = dict(entropy_coef=0.03, invalid_penalty=0.5, repeat_penalty=0.2)
    out = policy_loss(
        x["logp"],
        x["adv"],
        x["weights"],
        x["mask"],
        ActorTerms(entropy=x["entropy"], invalid=x["invalid"], repeat=x["repeat"], **coefs),
    )
    expected = ref.policy_loss(
        rows(x["logp"]),
        rows(x["adv"]),
        x["weights"].tolist(),
        rows(x["entropy"]),
        rows(x["mask"]),
        coefs["entropy_coef"],
        rows(x["invalid"]),
        coefs["invalid_penalty"],
        rows(x["repeat"]),
        coefs["repeat_penalty"],
    )
    assert math.isclose(float(out.loss), expected, rel_tol=1e-10, abs_tol=1e-12)
    assert math.isclose(
        float(out.policy_gradient - 0.03 * out.entropy + out.penalty), expected, rel_tol=1e-10, abs_tol=1e-12
    )


def test_policy_loss_gradients_flow_only_where_documented():
    x = random_policy_inputs(3)
    logp = x["logp"].clone().requires_grad_(True)
    adv = x["adv"].clone().requires_grad_(True)
    weights = x["weights"].clone().requires_grad_(True)
    entropy = x["entropy"].clone().requires_grad_(True)
    out = policy_loss(
        logp,
        adv,
        weights,
        x["mask"],
        ActorTerms(entropy=entropy, entropy_coef=0.1, invalid=x["invalid"], invalid_penalty=0.5),
    )
    out.loss.backward()
    real = x["mask"] > 0
    count = real.sum()
    expected_logp = (-weights.detach()[:, None] * x["adv"] + 0.5 * x["invalid"]) / count
    torch.testing.assert_close(logp.grad, torch.where(real, expected_logp, torch.zeros(())).to(torch.float64))
    torch.testing.assert_close(entropy.grad, torch.where(real, -0.1 / count, 0.0).to(torch.float64))
    assert adv.grad is None and weights.grad is None  # advantages and IS weights are constants
    assert not out.policy_gradient.requires_grad


def test_invalid_penalty_lowers_the_probability_of_invalid_actions():
    scores = torch.zeros(1, 3, requires_grad=True)  # three candidate actions, uniform
    log_probs = torch.log_softmax(scores, dim=-1)
    logp = log_probs[:, :1]  # the stored action is candidate 0, flagged invalid, zero advantage
    out = policy_loss(
        logp,
        torch.zeros(1, 1),
        None,
        torch.ones(1, 1),
        ActorTerms(invalid=torch.ones(1, 1), invalid_penalty=1.0),
    )
    out.loss.backward()
    stepped = scores.detach() - 0.5 * scores.grad
    assert float(torch.softmax(stepped, -1)[0, 0]) < 1 / 3


def test_policy_loss_with_no_real_steps_is_zero_and_finite():
    x = random_policy_inputs(7)
    logp = x["logp"].clone().requires_grad_(True)
    out = policy_loss(
        logp, x["adv"], None, torch.zeros_like(x["mask"]), ActorTerms(entropy=x["entropy"], entropy_coef=0.1)
    )
    out.loss.backward()
    assert float(out.loss.detach()) == 0.0 and bool((logp.grad == 0).all())


@pytest.mark.parametrize("seed", range(20))
def test_critic_loss_matches_reference_and_detaches_targets(seed):
    x = random_policy_inputs(seed)
    values = x["adv"].clone().requires_grad_(True)  # any (B, T) numbers with NaN padding
    targets = x["entropy"].clone().requires_grad_(True)
    loss = critic_loss(values, targets, x["mask"], x["weights"])
    expected = ref.critic_loss(rows(x["adv"]), rows(x["entropy"]), rows(x["mask"]), x["weights"].tolist())
    assert math.isclose(float(loss.detach()), expected, rel_tol=1e-10, abs_tol=1e-12)
    loss.backward()
    real = x["mask"] > 0
    grad = x["weights"][:, None] * (x["adv"] - x["entropy"]) / real.sum()
    torch.testing.assert_close(values.grad, torch.where(real, grad, torch.zeros(())).to(torch.float64))
    assert targets.grad is None
    unweighted = critic_loss(values, targets, x["mask"])
    ones = ref.critic_loss(rows(x["adv"]), rows(x["entropy"]), rows(x["mask"]), [1.0] * len(x["weights"]))
    assert math.isclose(float(unweighted.detach()), ones, rel_tol=1e-10, abs_tol=1e-12)


@pytest.mark.parametrize("seed", range(10))
def test_trajectory_critic_bce_matches_reference(seed):
    gen = torch.Generator().manual_seed(seed)
    logits = 3 * torch.randn(8, generator=gen, dtype=torch.float64)
    success = (torch.rand(8, generator=gen) < 0.4).to(torch.float64)
    loss = trajectory_critic_loss(logits, success)
    assert math.isclose(float(loss), ref.bce_with_logits(logits.tolist(), success.tolist()), rel_tol=1e-10)


def test_shape_errors_name_the_problem():
    x = random_policy_inputs(0)
    with pytest.raises(ValueError, match="is_weights"):
        policy_loss(x["logp"], x["adv"], torch.ones(2), x["mask"])
    with pytest.raises(ValueError, match="mask"):
        critic_loss(x["logp"], x["adv"], x["mask"][:, :2])
    with pytest.raises(ValueError, match="entropy_coef"):
        policy_loss(x["logp"], x["adv"], None, x["mask"], ActorTerms(entropy_coef=-1.0))
