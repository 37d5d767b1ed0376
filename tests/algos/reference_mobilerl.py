"""Plain-Python-loop references for distrl_core.algos.mobilerl and distrl_core.algos.decoupled:
lists of floats in, floats out, written from the formulas in those modules' docstrings
(docs/architecture.md, "MobileRL-style options" and "Decoupled PPO")."""

from __future__ import annotations

import math

from reference_impl import real_length


def positive_replay_multiplier(success: list[float], rate: list[float], strength: float) -> list[float]:
    out = []
    for s, p in zip(success, rate, strict=True):
        p = min(1.0, max(0.0, p))
        out.append(1.0 + strength * (1.0 - p) if s > 0 else 1.0)
    return out


def failure_curriculum_weights(
    attempts: list[int], successes: list[int], min_attempts: int, floor: float
) -> list[float]:
    out = []
    for n, k in zip(attempts, successes, strict=True):
        out.append(floor if n >= min_attempts and k == 0 else 1.0)
    return out


def shortest_path_rewards(rewards, mask, success, shortest, exponent):
    out = []
    for b in range(len(rewards)):
        n = real_length(mask[b])
        row = list(rewards[b])
        if n > 0 and success[b] > 0:
            factor = min(1.0, max(1.0, shortest[b]) / n) ** exponent
            row[n - 1] = rewards[b][n - 1] * factor
        out.append(row)
    return out


def decoupled_ppo_loss(logp, logp_prox, logp_mu, adv, mask, clip_eps, weight_max, entropy, entropy_coef):
    total, ent, count = 0.0, 0.0, 0
    for b in range(len(logp)):
        for t in range(len(logp[b])):
            if mask[b][t] <= 0:
                continue
            w = min(weight_max, math.exp(max(-20.0, min(20.0, logp_prox[b][t] - logp_mu[b][t]))))
            r = math.exp(max(-20.0, min(20.0, logp[b][t] - logp_prox[b][t])))
            clipped = max(1 - clip_eps, min(1 + clip_eps, r))
            total += w * min(r * adv[b][t], clipped * adv[b][t])
            ent += entropy[b][t]
            count += 1
    if count == 0:
        return 0.0
    return -total / count - entropy_coef * ent / count
