"""A-RIDE math and the baselines' math: pure functions on torch tensors, no I/O, no state.

Conventions: batches are padded (B, T) tensors with a `mask` (B, T), 1 = real step, real steps first in
each row; padded steps produce 0 and never leak into real ones (even if they hold NaN). Targets,
advantages, ratios, priorities and weights are detached; losses keep the gradient of their inputs.

Importance ratios (`ratios`)
    importance_ratios(logp_pi, logp_mu, mask=None, max_log_ratio=20.0) -> ρ (B, T)
    truncate_ratios(rho, *, rho_max, c_max, lam) -> (ρ̄, c)
Retrace / returns (`retrace`)
    retrace_targets(values, rewards, dones, rho, mask, bootstrap_value=None, *, gamma, lam, rho_max, c_max)
        -> RetraceTargets(v_targets, advantages, td_errors, rho_bar)
    discounted_returns(rewards, dones, mask, gamma, bootstrap_value=None) -> G (B, T)
Losses (`losses`)
    ActorTerms(entropy=None, invalid=None, repeat=None, entropy_coef=0, invalid_penalty=0, repeat_penalty=0)
        the entropy bonus and penalties every actor loss adds (its `terms` argument)
    policy_loss(logp_pi, advantages, is_weights, mask, terms=None)
        -> PolicyLoss(loss, policy_gradient, entropy, penalty)
    critic_loss(values, targets, mask, is_weights=None) -> scalar
    trajectory_critic_loss(logits, success, weights=None) -> scalar
Entropy (`entropy`)
    token_entropy(logits, token_mask, reduction="sum") -> (...)
    candidate_log_probs(scores, cand_mask) -> (..., K)
    candidate_entropy(scores, cand_mask) -> (...)
Prioritized replay (`priorities`)
    dper_priority(td_errors, rho_bar, entropy, mask, *, w1, w2, w3, eps) -> (B,)
    importance_weights(probabilities, n, beta, min_probability=None) -> (B,)
    linear_schedule(start, end, steps, t) -> float
Baselines (`baselines`, DigiRL arXiv 2406.11896 and filtered BC)
    digirl_step_advantages(rewards, values, dones, mask, *, lam, bootstrap_value=None) -> (B, T)
    curriculum_mask(trajectory_returns, instruction_values, top_fraction=0.1) -> (B,) bool
    filtered_awr_loss(logp_pi, advantages, mask, keep=None, threshold=0.05) -> scalar
    filtered_bc_loss(logp_pi, mask, success) -> scalar
Critic-free group baseline (`group`, GiGPO-style, verl-agent 2025)
    group_normalize(x, group_ids, valid, *, use_std=True, eps=1e-6) -> ((N,), group sizes (N,))
    gigpo_advantages(rewards, dones, mask, episode_groups, step_groups, *, gamma, omega=1, use_std=True,
                     eps=1e-6) -> GroupAdvantages(advantages, episode, step, returns, singleton_step_fraction)
    clipped_policy_loss(logp_pi, logp_mu, advantages, mask, *, clip_eps, terms=None)
        -> ClippedLoss(loss, policy_gradient, entropy, penalty, clip_fraction)
MobileRL-style data shaping (`mobilerl`, MobileRL/AdaGRPO 2025)
    positive_replay_multiplier(success, task_success_rate, *, strength) -> (B,)
    failure_curriculum_weights(attempts, successes, *, min_attempts, floor) -> (K,)
    shortest_path_rewards(rewards, mask, success, shortest, *, exponent=1) -> (B, T)
Decoupled PPO (`decoupled`, AReaL 2025)
    decoupled_ppo_loss(logp_pi, logp_prox, logp_mu, advantages, mask, *, clip_eps, weight_max, terms=None)
        -> DecoupledLoss(loss, policy_gradient, entropy, penalty, clip_fraction, behaviour_weight_mean,
                         truncated_fraction)
Helpers (`masking`)
    masked_mean(x, mask) -> scalar
"""

from __future__ import annotations

from distrl_core.algos.baselines import (
    curriculum_mask,
    digirl_step_advantages,
    filtered_awr_loss,
    filtered_bc_loss,
)
from distrl_core.algos.decoupled import DecoupledLoss, decoupled_ppo_loss
from distrl_core.algos.entropy import candidate_entropy, candidate_log_probs, token_entropy
from distrl_core.algos.group import (
    ClippedLoss,
    GroupAdvantages,
    clipped_policy_loss,
    gigpo_advantages,
    group_normalize,
)
from distrl_core.algos.losses import ActorTerms, PolicyLoss, critic_loss, policy_loss, trajectory_critic_loss
from distrl_core.algos.masking import masked_mean
from distrl_core.algos.mobilerl import (
    failure_curriculum_weights,
    positive_replay_multiplier,
    shortest_path_rewards,
)
from distrl_core.algos.priorities import dper_priority, importance_weights, linear_schedule
from distrl_core.algos.ratios import importance_ratios, truncate_ratios
from distrl_core.algos.retrace import RetraceTargets, discounted_returns, retrace_targets

__all__ = [
    "ActorTerms",
    "ClippedLoss",
    "DecoupledLoss",
    "GroupAdvantages",
    "PolicyLoss",
    "RetraceTargets",
    "candidate_entropy",
    "candidate_log_probs",
    "clipped_policy_loss",
    "critic_loss",
    "curriculum_mask",
    "decoupled_ppo_loss",
    "digirl_step_advantages",
    "discounted_returns",
    "dper_priority",
    "failure_curriculum_weights",
    "filtered_awr_loss",
    "filtered_bc_loss",
    "gigpo_advantages",
    "group_normalize",
    "importance_ratios",
    "importance_weights",
    "linear_schedule",
    "masked_mean",
    "policy_loss",
    "positive_replay_multiplier",
    "retrace_targets",
    "shortest_path_rewards",
    "token_entropy",
    "trajectory_critic_loss",
    "truncate_ratios",
]
