"""Plain-Python-loop references for distrl_core.algos: lists of floats in, lists of floats out.

Written from the formulas (docs/architecture.md, "The learner's loss"; DigiRL arXiv 2406.11896), deliberately without torch and,
where a closed form exists, without the backward recursion the library uses (V-trace as an explicit sum
of discounted, trace-weighted TD errors), so that agreement means something.
"""

from __future__ import annotations

import math

Rows = list[list[float]]


def real_length(mask_row: list[float]) -> int:
    """Number of real steps in a left-aligned row."""
    length = 0
    for m in mask_row:
        if m > 0:
            length += 1
    return length


def importance_ratios(logp_pi: Rows, logp_mu: Rows, mask: Rows, max_log_ratio: float) -> Rows:
    out = []
    for b in range(len(logp_pi)):
        row = []
        for t in range(len(logp_pi[b])):
            if mask[b][t] > 0:
                d = logp_pi[b][t] - logp_mu[b][t]
                d = max(-max_log_ratio, min(max_log_ratio, d))
                row.append(math.exp(d))
            else:
                row.append(0.0)
        out.append(row)
    return out


def _next_value(values_row, t, n, bootstrap):
    """V(s_{t+1}) inside the window, the bootstrap after its last real step."""
    return values_row[t + 1] if t + 1 < n else bootstrap


def retrace(
    values: Rows,
    rewards: Rows,
    dones: Rows,
    rho: Rows,
    mask: Rows,
    bootstrap: list[float],
    gamma: float,
    lam: float,
    rho_max: float,
    c_max: float,
) -> tuple[Rows, Rows, Rows]:
    """(v_targets, advantages, td_errors) via v_s = V_s + Σ_{t≥s} (Π_{i=s}^{t-1} γ(1−d_i) c_i) ρ̄_t δ_t."""
    all_v, all_a, all_d = [], [], []
    for b in range(len(values)):
        horizon = len(values[b])
        n = real_length(mask[b])
        rho_bar = [min(rho_max, rho[b][t]) for t in range(n)]
        trace = [lam * min(c_max, rho[b][t]) for t in range(n)]
        delta = []
        for t in range(n):
            not_done = 1.0 - dones[b][t]
            delta.append(
                rewards[b][t] + gamma * not_done * _next_value(values[b], t, n, bootstrap[b]) - values[b][t]
            )
        v = []
        for s in range(n):
            total = values[b][s]
            coef = 1.0
            for t in range(s, n):
                total += coef * rho_bar[t] * delta[t]
                coef *= gamma * (1.0 - dones[b][t]) * trace[t]
            v.append(total)
        adv = []
        for s in range(n):
            next_target = v[s + 1] if s + 1 < n else bootstrap[b]
            adv.append(
                rho_bar[s] * (rewards[b][s] + gamma * (1.0 - dones[b][s]) * next_target - values[b][s])
            )
        pad = [0.0] * (horizon - n)
        all_v.append(v + pad)
        all_a.append(adv + pad)
        all_d.append(delta + pad)
    return all_v, all_a, all_d


def discounted_returns(rewards: Rows, dones: Rows, mask: Rows, gamma: float, bootstrap: list[float]) -> Rows:
    """G_s = Σ_{t=s}^{n-1} γ^{t-s} r_t (stopping after a done) + γ^{n-s} bootstrap if no done in between."""
    out = []
    for b in range(len(rewards)):
        n = real_length(mask[b])
        row = []
        for s in range(n):
            total, discount, ended = 0.0, 1.0, False
            for t in range(s, n):
                total += discount * rewards[b][t]
                discount *= gamma
                if dones[b][t] > 0:
                    ended = True
                    break
            if not ended:
                total += discount * bootstrap[b]
            row.append(total)
        out.append(row + [0.0] * (len(rewards[b]) - n))
    return out


def masked_mean(x: Rows, mask: Rows) -> float:
    total, count = 0.0, 0
    for b in range(len(x)):
        for t in range(len(x[b])):
            if mask[b][t] > 0:
                total += x[b][t]
                count += 1
    return total / max(count, 1)


def policy_loss(
    logp, adv, weights, entropy, mask, entropy_coef, invalid, invalid_penalty, repeat, repeat_penalty
):
    pg, ent, inv, rep, count = 0.0, 0.0, 0.0, 0.0, 0
    for b in range(len(logp)):
        for t in range(len(logp[b])):
            if mask[b][t] > 0:
                count += 1
                pg += weights[b] * adv[b][t] * logp[b][t]
                ent += entropy[b][t]
                inv += invalid[b][t] * logp[b][t]
                rep += repeat[b][t] * logp[b][t]
    count = max(count, 1)
    return (
        -pg / count
        - entropy_coef * ent / count
        + invalid_penalty * inv / count
        + repeat_penalty * rep / count
    )


def critic_loss(values: Rows, targets: Rows, mask: Rows, weights: list[float]) -> float:
    total, count = 0.0, 0
    for b in range(len(values)):
        for t in range(len(values[b])):
            if mask[b][t] > 0:
                total += weights[b] * (values[b][t] - targets[b][t]) ** 2
                count += 1
    return 0.5 * total / max(count, 1)


def bce_with_logits(logits: list[float], labels: list[float]) -> float:
    total = 0.0
    for z, y in zip(logits, labels, strict=True):
        p = 1.0 / (1.0 + math.exp(-z))
        total += -(y * math.log(p) + (1 - y) * math.log(1 - p))
    return total / len(logits)


def dper_priority(td, rho_bar, entropy, mask, w1, w2, w3, eps) -> list[float]:
    out = []
    for b in range(len(td)):
        n = 0
        s_td, s_rho, s_h = 0.0, 0.0, 0.0
        for t in range(len(td[b])):
            if mask[b][t] > 0:
                n += 1
                s_td += abs(td[b][t])
                s_rho += rho_bar[b][t]
                s_h += entropy[b][t]
        if n == 0:
            out.append(eps)
        else:
            out.append(w1 * s_td / n + w2 * s_rho / n + w3 * s_h / n + eps)
    return out


def importance_weights(probabilities: list[float], n: int, beta: float) -> list[float]:
    raw = [(n * p) ** (-beta) for p in probabilities]
    top = max(raw)
    return [w / top for w in raw]


def token_entropy(logits, token_mask, reduction: str) -> list[float]:
    """logits: [action][token][vocab]; entropy per action."""
    out = []
    for a in range(len(logits)):
        total, count = 0.0, 0
        for pos in range(len(logits[a])):
            if token_mask[a][pos] <= 0:
                continue
            top = max(logits[a][pos])
            z = sum(math.exp(x - top) for x in logits[a][pos])
            h = 0.0
            for x in logits[a][pos]:
                p = math.exp(x - top) / z
                if p > 0:
                    h -= p * math.log(p)
            total += h
            count += 1
        out.append(total if reduction == "sum" else total / max(count, 1))
    return out


def candidate_entropy(scores, cand_mask) -> list[float]:
    out = []
    for row, m in zip(scores, cand_mask, strict=True):
        valid = [s for s, k in zip(row, m, strict=True) if k > 0]
        if not valid:
            out.append(0.0)
            continue
        top = max(valid)
        z = sum(math.exp(s - top) for s in valid)
        h = 0.0
        for s in valid:
            p = math.exp(s - top) / z
            h -= p * math.log(p)
        out.append(h)
    return out


def digirl_step_advantages(rewards, values, dones, mask, lam, bootstrap) -> Rows:
    out = []
    for b in range(len(rewards)):
        n = real_length(mask[b])
        row = []
        for h in range(n):
            end = h
            while end < n - 1 and dones[b][end] <= 0:
                end += 1
            if dones[b][h] > 0:
                next_value = 0.0
            elif h + 1 < n:
                next_value = values[b][h + 1]
            else:
                next_value = bootstrap[b]
            weight = lam ** (end - h)
            row.append(weight * rewards[b][end] + (1 - weight) * (rewards[b][h] + next_value - values[b][h]))
        out.append(row + [0.0] * (len(rewards[b]) - n))
    return out


def quantile(xs: list[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default)."""
    ordered = sorted(xs)
    pos = q * (len(ordered) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (pos - low) * (ordered[high] - ordered[low])


def curriculum_mask(returns: list[float], values: list[float], top_fraction: float) -> list[bool]:
    adv = [r - min(max(v, 1e-4), 1 - 1e-4) for r, v in zip(returns, values, strict=True)]
    cutoff = quantile(adv, 1 - top_fraction)
    return [a >= cutoff for a in adv]


def filtered_awr_loss(logp, adv, mask, keep, threshold) -> float:
    total, count = 0.0, 0
    for b in range(len(logp)):
        if not keep[b]:
            continue
        for t in range(len(logp[b])):
            if mask[b][t] > 0:
                count += 1
                if adv[b][t] > threshold:
                    total += logp[b][t]
    return -total / max(count, 1)


def filtered_bc_loss(logp, mask, success) -> float:
    total, count = 0.0, 0
    for b in range(len(logp)):
        if success[b] <= 0:
            continue
        for t in range(len(logp[b])):
            if mask[b][t] > 0:
                total += logp[b][t]
                count += 1
    return -total / max(count, 1)


def _normalise_groups(values: dict, use_std: bool, eps: float) -> dict:
    """{key: [(member, x), ...]} -> {member: normalised x}; members of singleton groups get 0."""
    out = {}
    for members in values.values():
        xs = [x for _, x in members]
        n = len(xs)
        mean = sum(xs) / n
        std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
        for member, x in members:
            if n == 1:
                out[member] = 0.0
            else:
                out[member] = (x - mean) / (std + eps) if use_std and std + eps > 0 else x - mean
    return out


def gigpo_advantages(rewards, dones, mask, episode_groups, step_groups, gamma, omega, use_std, eps):
    """(advantages, episode, step, returns): G_t as the explicit sum Σ_k γ^k r_{t+k} up to the episode's
    end (the first done at or after t, or the row's last real step)."""
    batch = len(rewards)
    returns, episode_members, step_members = [], {}, {}
    for b in range(batch):
        n = real_length(mask[b])
        row = [0.0] * len(rewards[b])
        for t in range(n):
            total, k = 0.0, 0
            while t + k < n:
                total += gamma**k * rewards[b][t + k]
                if dones[b][t + k] > 0:
                    break
                k += 1
            row[t] = total
            step_members.setdefault((episode_groups[b], step_groups[b][t]), []).append(((b, t), total))
        returns.append(row)
        if n > 0:
            episode_members.setdefault(episode_groups[b], []).append((b, sum(rewards[b][:n])))
    episode_adv = _normalise_groups(episode_members, use_std, eps)
    step_adv = _normalise_groups(step_members, use_std, eps)
    episode = [episode_adv.get(b, 0.0) for b in range(batch)]
    step = [[step_adv.get((b, t), 0.0) for t in range(len(rewards[b]))] for b in range(batch)]
    advantages = [
        [episode[b] + omega * step[b][t] if mask[b][t] > 0 else 0.0 for t in range(len(rewards[b]))]
        for b in range(batch)
    ]
    return advantages, episode, step, returns


def clipped_policy_loss(logp, logp_mu, adv, mask, clip_eps, entropy, entropy_coef) -> float:
    total, count, ent = 0.0, 0, 0.0
    for b in range(len(logp)):
        for t in range(len(logp[b])):
            if mask[b][t] > 0:
                ratio = math.exp(max(-20.0, min(20.0, logp[b][t] - logp_mu[b][t])))
                clipped = max(1 - clip_eps, min(1 + clip_eps, ratio))
                total += min(ratio * adv[b][t], clipped * adv[b][t])
                ent += entropy[b][t]
                count += 1
    if count == 0:
        return 0.0
    return -total / count - entropy_coef * ent / count
