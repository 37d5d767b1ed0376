"""MobileRL-style data shaping (Xu et al. 2025, "MobileRL: Online Agentic Reinforcement Learning for
Mobile GUI Agents", its AdaGRPO): three pure functions the learner combines with any objective.

- Difficulty-adaptive positive replay: a successful trajectory of a task the policy rarely solves is
  replayed more. Its sampling priority is multiplied by

      m_i = 1 + κ · s_i · (1 − p̂_task(i))

  (s_i = 1 for a success, 0 otherwise; p̂ the task's success rate so far; κ ≥ 0). Failures and
  successes of always-solved tasks keep m = 1.
- Failure-curriculum filtering: a task attempted at least N times and never solved gets weight
  φ ∈ (0, 1] (a floor, so it is still tried now and then), every other task weight 1:

      w_k = φ if (attempts_k ≥ N and successes_k = 0) else 1.

  The weight scales a task's chance of being collected and its trajectories' replay priority; the
  caller's periodic reset of the counts (``learner.task_stats``) retries the task at full weight.
- Shortest-path reward: the success reward of an episode of length L is scaled by the shortest
  successful length L_min known for its task,

      r'_t = r_t · (L_min / L)^η  at the episode's last step if it succeeded; r'_t = r_t elsewhere,

  with η ≥ 0 (η = 1: MobileRL's L_min/L; η = 0: unchanged). A success no longer than any before it
  (L ≤ L_min) keeps its full reward; a longer one gets less, so among successes the short ones win.

All outputs are detached: they weight data, they are not trained through.
"""

from __future__ import annotations

import torch

from distrl_core.algos.masking import (
    as_step_mask,
    check_non_negative,
    check_probability,
    require_left_aligned,
)

__all__ = ["failure_curriculum_weights", "positive_replay_multiplier", "shortest_path_rewards"]


def positive_replay_multiplier(
    success: torch.Tensor,  # (B,) 1 = the trajectory's episode succeeded
    task_success_rate: torch.Tensor,  # (B,) success rate of each trajectory's task, in [0, 1]
    *,
    strength: float,
) -> torch.Tensor:  # (B,) ≥ 1, detached
    """m_i = 1 + κ · s_i · (1 − p̂_i) (module docstring); κ = ``strength``."""
    if success.shape != task_success_rate.shape or success.ndim != 1:
        raise ValueError(
            f"success {tuple(success.shape)} and task_success_rate {tuple(task_success_rate.shape)} "
            "must both be (B,): one entry per trajectory"
        )
    check_non_negative("strength", strength)
    rate = task_success_rate.detach().clamp(0.0, 1.0)
    solved = (success.detach() > 0).to(rate.dtype)
    return 1.0 + strength * solved * (1.0 - rate)


def failure_curriculum_weights(
    attempts: torch.Tensor,  # (K,) episodes of each task seen (since its last reset)
    successes: torch.Tensor,  # (K,) of which succeeded
    *,
    min_attempts: int,
    floor: float,
) -> torch.Tensor:  # (K,) in {floor, 1}
    """w_k = φ for a task tried ≥ N times and never solved, 1 otherwise; N = ``min_attempts``,
    φ = ``floor``."""
    if attempts.shape != successes.shape or attempts.ndim != 1:
        raise ValueError(
            f"attempts {tuple(attempts.shape)} and successes {tuple(successes.shape)} must both be (K,)"
        )
    if min_attempts < 1:
        raise ValueError(f"min_attempts={min_attempts} must be >= 1")
    check_probability("floor", floor, allow_zero=False)
    given_up = (attempts >= min_attempts) & (successes <= 0)
    ones = torch.ones(attempts.shape, dtype=torch.float64, device=attempts.device)
    return torch.where(given_up, ones * floor, ones)


def shortest_path_rewards(
    rewards: torch.Tensor,  # (B, T)
    mask: torch.Tensor,  # (B, T) real steps first; each row a whole episode
    success: torch.Tensor,  # (B,) 1 = the episode succeeded
    shortest: torch.Tensor,  # (B,) L_min: shortest successful length known for the row's task (steps)
    *,
    exponent: float = 1.0,
) -> torch.Tensor:  # (B, T), padding left as it was
    """r' = r · (L_min / L)^η at the last real step of a successful row (module docstring); L is the
    row's real steps. L_min is clamped to [1, L] so the factor stays in (0, 1]."""
    real = as_step_mask(mask, rewards.shape)
    require_left_aligned(real)
    if tuple(success.shape) != (rewards.shape[0],) or success.shape != shortest.shape:
        raise ValueError(
            f"success {tuple(success.shape)} and shortest {tuple(shortest.shape)} must be "
            f"({rewards.shape[0]},): one entry per row"
        )
    check_non_negative("exponent", exponent)
    with torch.no_grad():
        length = real.sum(dim=1)  # (B,)
        dtype = rewards.dtype if rewards.is_floating_point() else torch.float32
        length_f = length.clamp(min=1).to(dtype)
        ratio = (shortest.detach().to(dtype).clamp(min=1.0) / length_f).clamp(max=1.0)  # (B,)
        factor = torch.where((success > 0) & (length > 0), ratio**exponent, torch.ones_like(ratio))
        last = (length - 1).clamp(min=0)  # (B,)
        columns = torch.arange(rewards.shape[1], device=rewards.device)
        at_end = (columns[None, :] == last[:, None]) & real  # (B, T)
        return torch.where(at_end, rewards.detach() * factor[:, None].to(rewards.dtype), rewards.detach())
