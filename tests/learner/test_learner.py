"""Learner.update: deterministic on CPU, complete metrics, sensible priorities, baselines, lag."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import torch

from distrl_core.learner import Learner, LearnerConfig, StepBatch
from storage.schema import steps_to_table

METRICS = {
    "actor_loss", "critic_loss", "entropy", "rho_mean", "rho_clipped_fraction", "policy_lag_mean",
    "policy_lag_max", "grad_norm_actor", "grad_norm_critic", "advantage_mean", "td_abs_mean",
    "critic_step", "critic_traj", "unknown_action_fraction", "update_s",
}  # fmt: skip


def _params(policy) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in policy.actor_parameters() + policy.critic_parameters()])


def test_update_is_deterministic_on_cpu(make_policy, episode_rows):
    results = []
    for _ in range(2):
        policy = make_policy()
        learner = Learner(policy, LearnerConfig(critic_warmup_updates=0, micro_batch_size=3, seed=7))
        metrics = [
            learner.update(StepBatch.from_rows(episode_rows, np.linspace(0.5, 1.0, 8)))[0] for _ in range(3)
        ]
        results.append((metrics, _params(policy)))
    (metrics_a, params_a), (metrics_b, params_b) = results
    assert torch.equal(params_a, params_b)
    for a, b in zip(metrics_a, metrics_b, strict=True):
        assert {k: v for k, v in a.items() if k != "update_s"} == {
            k: v for k, v in b.items() if k != "update_s"
        }
    assert not torch.equal(params_a, _params(make_policy()))  # it did train


def test_metrics_and_priorities(make_policy, episode_rows):
    learner = Learner(make_policy(), LearnerConfig(critic_warmup_updates=0), policy_version=5)
    table = steps_to_table(episode_rows)
    ids = sorted(set(table.column("episode_id").to_pylist()))
    draws = {episode: i for i, episode in enumerate(ids)}
    table = table.append_column(
        "sample_idx", pa.array([draws[e] for e in table.column("episode_id").to_pylist()])
    )
    metrics, priorities = learner.update(StepBatch.from_rows(table, np.ones(len(ids))))
    assert set(metrics) >= METRICS
    assert all(np.isfinite(v) for v in metrics.values())
    assert metrics["policy_lag_mean"] == metrics["policy_lag_max"] == 2.0  # rows are version 3
    assert priorities.shape == (len(ids),)
    assert bool((priorities > 0).all()) and len(set(priorities.round(6))) > 1
    assert 0.0 <= metrics["rho_clipped_fraction"] <= 1.0


def test_critic_warmup_leaves_the_actor_alone(make_policy, episode_rows):
    policy = make_policy()
    actor_before = torch.cat([p.detach().flatten().clone() for p in policy.actor_parameters()])
    critic_before = torch.cat([p.detach().flatten().clone() for p in policy.critic_parameters()])
    learner = Learner(policy, LearnerConfig(critic_warmup_updates=1))
    assert learner.update(StepBatch.from_rows(episode_rows))[0]["actor_trained"] == 0.0
    assert torch.equal(actor_before, torch.cat([p.detach().flatten() for p in policy.actor_parameters()]))
    assert not torch.equal(
        critic_before, torch.cat([p.detach().flatten() for p in policy.critic_parameters()])
    )
    assert learner.update(StepBatch.from_rows(episode_rows))[0]["actor_trained"] == 1.0


def test_stale_rows_are_masked_out(make_policy, episode_rows):
    learner = Learner(make_policy(), LearnerConfig(max_policy_lag=1), policy_version=10)
    metrics, _ = learner.update(StepBatch.from_rows(episode_rows))
    assert metrics["used_step_fraction"] == 0.0
    assert metrics["sampled_policy_lag_mean"] == 7.0 and metrics["policy_lag_mean"] == 0.0
    learner.policy_version = 4
    assert learner.update(StepBatch.from_rows(episode_rows))[0]["used_step_fraction"] == 1.0


def test_the_logged_lag_is_that_of_the_steps_trained_on(make_policy, episode_rows):
    first = episode_rows[0]["episode_id"]
    rows = [dict(r, policy_version=9 if r["episode_id"] == first else 3) for r in episode_rows]
    learner = Learner(make_policy(), LearnerConfig(max_policy_lag=1), policy_version=10)
    metrics, _ = learner.update(StepBatch.from_rows(rows))
    assert 0.0 < metrics["used_step_fraction"] < 1.0
    assert metrics["policy_lag_mean"] == metrics["policy_lag_max"] == 1.0  # only the fresh episode
    assert 1.0 < metrics["sampled_policy_lag_mean"] < 7.0


@pytest.mark.parametrize("algorithm", ["digirl", "filtered_bc"])
def test_baselines_share_the_interface(make_policy, episode_rows, algorithm):
    policy = make_policy()
    before = _params(policy)
    curriculum = {"curriculum_top_fraction": 0.5} if algorithm == "digirl" else {}  # a DigiRL field
    learner = Learner(policy, LearnerConfig(algorithm=algorithm, critic_warmup_updates=0, **curriculum))
    rows = [
        dict(r, episode_success=True, reward=float(r["done"])) for r in episode_rows
    ]  # some signal to imitate
    metrics, priorities = learner.update(StepBatch.from_rows(rows))
    assert {"actor_loss", "critic_loss", "kept_fraction", "grad_norm_actor"} <= set(metrics)
    assert np.array_equal(priorities, np.ones(8))
    assert not torch.equal(before, _params(policy))


def test_windows_are_refused_when_the_policy_needs_history(make_policy, episode_rows):
    learner = Learner(make_policy(history=1))
    with pytest.raises(ValueError, match="whole episodes"):
        learner.update(StepBatch.from_rows([r for r in episode_rows if r["step"] >= 1]))


def test_an_update_on_a_step_batch(make_policy, episode_rows):
    batch = StepBatch.from_rows(episode_rows)
    metrics, priorities = Learner(make_policy()).update(batch)
    assert metrics["trajectories"] == 8 and priorities.shape == (8,)


def test_importance_ratio_is_pi_over_mu(make_policy, episode_rows):
    """ρ = π/μ, not μ/π: lowering every recorded log μ by c multiplies the reported mean ρ by e^c.
    (The learning test alone does not catch an inverted ratio: clipped at 1, learning survives it.)"""
    shift = 0.3

    def rho_mean(rows) -> float:
        learner = Learner(
            make_policy(),
            LearnerConfig(seed=1, entity_dropout=0.0, word_dropout=0.0, critic_warmup_updates=0),
        )
        return learner.update(StepBatch.from_rows(rows, np.ones(8)))[0]["rho_mean"]

    shifted = [{**row, "behaviour_logprob": row["behaviour_logprob"] - shift} for row in episode_rows]
    assert rho_mean(shifted) == pytest.approx(rho_mean(episode_rows) * np.exp(shift), rel=1e-5)
