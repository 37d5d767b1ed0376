"""Baselines in the same harness: DigiRL (Bai et al. 2024, arXiv 2406.11896) and filtered behaviour cloning.

Definitions follow the DigiRL paper (§4, "step-level advantage" and "instruction-level value function /
curriculum") and its released trainer (DigiRL-agent/digirl: `algorithms/digirl/trainer.py::actor_loss`,
`algorithms/offpolicy_train_loop.py::filter_buffer`); see each function for where the two differ and which
one is implemented here.
"""

from __future__ import annotations

import torch

from distrl_core.algos.masking import (
    as_step_mask,
    check_bootstrap,
    check_probability,
    check_same_shape,
    compute_dtype,
    require_left_aligned,
    zero_padding,
)


def digirl_step_advantages(
    rewards: torch.Tensor,  # (B, T) r(s_h, a_h, c)
    values: torch.Tensor,  # (B, T) V^step(s_h, c), the step-level critic
    dones: torch.Tensor,  # (B, T) 1 = the episode ended after step h
    mask: torch.Tensor,  # (B, T) real steps first in each row
    *,
    lam: float,
    bootstrap_value: torch.Tensor | None = None,  # (B,) V^step of the state after the window; None = 0
) -> torch.Tensor:  # (B, T) detached, 0 at padding
    """DigiRL's doubly-robust step advantage:

        A_h = λ^(H−h) · r_H + (1 − λ^(H−h)) · (r_h + V^step(s_{h+1}) − V^step(s_h))

    where H is the last step of h's episode: the first done step at or after h, or the row's last real step
    when the window ends first (DigiRL itself trains on whole episodes). The Monte-Carlo term (the episode's
    final reward, discounted by λ per remaining step) dominates near the end of the episode and the
    one-step value difference far from it. V^step(s_{H+1}) is 0 after a done step and `bootstrap_value`
    after a window that ends without one. No γ in the one-step term, as in the paper. (The released trainer
    instead adds the two terms — V(s') − V(s) + r + mc_return — with γ-discounted mc_return; the paper's
    convex combination is what is implemented here.)
    """
    shape = check_same_shape(rewards=rewards, values=values, dones=dones)
    real = as_step_mask(mask, shape)
    require_left_aligned(real)
    check_probability("lam", lam)
    with torch.no_grad():
        dtype = compute_dtype(values)
        rewards_, values_ = rewards.detach().to(dtype), values.detach().to(dtype)
        ended = dones.detach() > 0
        bootstrap = check_bootstrap(bootstrap_value, values_)
        zero = torch.zeros((), dtype=dtype, device=values.device)
        advantages = torch.zeros_like(values_)
        final_reward = torch.zeros_like(bootstrap)  # r_H of the episode the backward sweep is in
        steps_left = torch.zeros_like(bootstrap)  # H − h
        for t in reversed(range(shape[1])):
            next_real = real[:, t + 1] if t + 1 < shape[1] else torch.zeros_like(real[:, t])
            episode_ends_here = ended[:, t] | ~next_real
            final_reward = torch.where(episode_ends_here, rewards_[:, t], final_reward)
            steps_left = torch.where(episode_ends_here, zero, steps_left + 1)
            next_value = values_[:, t + 1] if t + 1 < shape[1] else bootstrap
            next_value = torch.where(ended[:, t], zero, torch.where(next_real, next_value, bootstrap))
            one_step = rewards_[:, t] + next_value - values_[:, t]
            mc_weight = lam**steps_left
            advantage = mc_weight * final_reward + (1 - mc_weight) * one_step
            advantages[:, t] = torch.where(real[:, t], advantage, zero)
    return advantages


def curriculum_mask(
    trajectory_returns: torch.Tensor,  # (B,) each trajectory's return (success 0/1 for terminal rewards)
    instruction_values: torch.Tensor,  # (B,) V^instruct(c): predicted success of the trajectory's instruction
    top_fraction: float = 0.1,
) -> torch.Tensor:  # (B,) bool, True = keep
    """DigiRL's instruction-level curriculum: keep the trajectories whose instruction-level advantage
    A = return − V^instruct(c) is in the top `top_fraction` of the batch, i.e.
    A ≥ quantile(A, 1 − top_fraction)
    (linear interpolation, as numpy's default quantile). Signed, as in the released `filter_buffer`: it
    favours successes on instructions the agent usually fails, the most informative ones. Ties at the cutoff
    are all kept, so more than `top_fraction` may pass. The trajectory critic's value is clamped to
    [1e-4, 1 − 1e-4] as DigiRL does.
    """
    if trajectory_returns.ndim != 1 or trajectory_returns.shape != instruction_values.shape:
        raise ValueError(
            f"trajectory_returns {tuple(trajectory_returns.shape)} and instruction_values "
            f"{tuple(instruction_values.shape)} must both be (B,)"
        )
    check_probability("top_fraction", top_fraction, allow_zero=False)
    with torch.no_grad():
        dtype = compute_dtype(trajectory_returns)
        advantage = trajectory_returns.detach().to(dtype) - instruction_values.detach().to(dtype).clamp(
            1e-4, 1 - 1e-4
        )
        cutoff = torch.quantile(advantage, 1 - top_fraction)
        return advantage >= cutoff


def filtered_awr_loss(
    logp_pi: torch.Tensor,  # (B, T) log π(a_h | s_h, c), with gradient
    advantages: torch.Tensor,  # (B, T) step advantages, e.g. `digirl_step_advantages`
    mask: torch.Tensor,  # (B, T) 1 = real step
    keep: torch.Tensor | None = None,  # (B,) curriculum filter (`curriculum_mask`); None = keep all
    threshold: float = 0.05,
) -> torch.Tensor:  # ()
    """DigiRL's filtered advantage-weighted regression: a hard filter instead of exp(A/τ) weights.

        loss = −Σ_{kept rows, real steps} 1[A_h > threshold] · log π_h / (number of kept real steps)

    Every step of the kept trajectories counts in the denominator, filtered or not, as the released trainer
    averages log π · 1[A > 0] over its whole batch. Its advantage carries a −0.05 margin before keeping the
    positive part, hence the default threshold 0.05. Returns 0 (still attached to the graph) when nothing
    is kept.
    """
    shape = check_same_shape(logp_pi=logp_pi, advantages=advantages)
    steps = as_step_mask(mask, shape)
    if keep is not None:
        if tuple(keep.shape) != (shape[0],):
            raise ValueError(
                f"keep has shape {tuple(keep.shape)}; pass one flag per trajectory, ({shape[0]},)"
            )
        steps = steps & (keep > 0).unsqueeze(1)
    selected = steps & (advantages.detach() > threshold)
    total = zero_padding(logp_pi, selected).sum()
    return -total / steps.sum().clamp(min=1).to(logp_pi.dtype)


def filtered_bc_loss(
    logp_pi: torch.Tensor,  # (B, T) log π(a_h | s_h, c), with gradient
    mask: torch.Tensor,  # (B, T) 1 = real step
    success: torch.Tensor,  # (B,) 1 = the trajectory succeeded
) -> torch.Tensor:  # ()
    """Filtered behaviour cloning: −mean(log π) over the real steps of successful trajectories only.

    (DigiRL's `filterbc_buffer` keeps trajectories whose reward reaches the batch's 90th percentile: the
    successes when more than about 10% succeed, but every trajectory when fewer do, since the cutoff is then
    0. Filtering on success avoids that.)
    Returns 0 (attached to the graph) when no trajectory succeeded.
    """
    if tuple(success.shape) != (logp_pi.shape[0],):
        raise ValueError(f"success has shape {tuple(success.shape)}; pass one flag per trajectory")
    steps = as_step_mask(mask, logp_pi.shape) & (success > 0).unsqueeze(1)
    return -zero_padding(logp_pi, steps).sum() / steps.sum().clamp(min=1).to(logp_pi.dtype)
