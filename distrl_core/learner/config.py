"""The learner's hyper-parameters: one dataclass, every field documented and validated here.

Reference values from the papers' released configs, for users training large models:

| field | here | DistRL (DistRL-open multimachine/default.yaml) | DigiRL (scripts/config/main/default.yaml) |
|---|---|---|---|
| gamma | 0.9 | 0.5 | 0.5 |
| lam (Retrace λ) | 0.95 | 1 (fixed in code) | — |
| rho_max / c_max | 1.0 / 1.0 | clip_rho_threshold 1.0, clip_pg_rho_threshold 1.0 | — |
| actor_lr / critic_lr | 1e-3 / 1e-3 | lm_lr 1e-4 / critic_lr 1e-4 | 1e-4 / 1e-4 |
| batch (trajectories per update) | 16 | 4 × grad_accum_steps 32 = 128 (steps) | 4 × 32 |
| actor/critic grad clip | 1.0 / 1.0 | max_grad_norm 0.01 | 0.01 |
| w1 (DPER |δ| weight) | 1.0 | dper_w1 50 | — |
| alpha / beta (replay) | 0.6 / 0.4 → 1 | (prioritized sampler unused in code) | — |

The tiny default policy learns with larger learning rates and looser clipping than a 1B-parameter
AutoUI/VLM; start from the reference column for those. α lives in the replay's settings
(``storage.replay_config``); the learner anneals β and reports it through :meth:`beta_at`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal, get_args

__all__ = ["ALGORITHMS", "Algorithm", "LearnerConfig"]

Algorithm = Literal["aride", "digirl", "filtered_bc", "gigpo"]
ALGORITHMS: tuple[str, ...] = get_args(Algorithm)


@dataclass
class LearnerConfig:
    """Hyper-parameters of ``Learner.update``.

    - ``algorithm``: "aride" (Retrace actor-critic with DPER priorities), "digirl" (doubly-robust
      advantages, instruction curriculum, filtered AWR), "filtered_bc" (successes only) or "gigpo"
      (critic-free group-relative advantages, GiGPO-style: algos.group).
    - ``gamma``: discount γ. ``lam``: Retrace trace λ. ``rho_max``/``c_max``: truncation of the
      ratios in the targets/advantage (ρ̄) and in the traces (c).
    - ``actor_lr``/``critic_lr``: AdamW learning rates of the actor (backbone, scoring head) and of
      the critics (value head, trajectory critic). ``weight_decay``: AdamW weight decay (both).
      Measured on the validation bench (as below): actor_lr 1e-3 gave 0.55 against 0.70 at 3e-4.
    - ``micro_batch_size``: trajectories per forward/backward; a larger batch is accumulated.
    - ``actor_grad_clip``/``critic_grad_clip``: max global grad norm per optimiser (0 = no clip).
    - ``entropy_coef``: β of the entropy bonus. ``invalid_penalty``/``repeat_penalty``: push
      down invalid actions and actions repeated on an unchanged screen (see algos.losses).
    - ``critic_warmup_updates``: the first updates train only the critics. A fresh (or
      warm-started) critic is far off the new policy's returns, and advantages from it would push
      every action of the first failed episodes down at once.
    - ``trajectory_critic_coef``: weight of the trajectory critic's BCE in the critic loss.
    - ``normalize_advantages``/``positive_advantages_only``: the one deliberate deviation from
      ARCHITECTURE §4's actor loss −mean(w·A·log π). By default A-RIDE's Retrace advantages are
      centred and scaled over the batch's steps, then clamped to their positive part (DistRL's
      released trainer also clamps its advantages to [0, 1]); bad actions are pushed down by the
      invalid/repeat penalties only. Measured (bench/learning_curve.py --validation, 8000 env
      steps, validation success, mean of the last 10 rounds, from 0.355): both on 0.70; positive
      only 0.47; normalised signed 0.15; §4 as written (both False) 0.00 — in failed 10-step
      episodes most steps carry negative advantages, often on looped, repeated state-action
      pairs, and the signed gradient pushed the policy off its correct actions until it solved
      nothing. Set both False for the exact §4 loss (``--methods aride_pure`` in the bench).
    - ``w1``/``w2``/``w3``/``priority_eps``: DPER priority p = w1·mean|δ| + w2·mean ρ̄ + w3·mean H + ε.
    - ``beta_start``/``beta_end``/``beta_anneal_updates``: IS-weight exponent β schedule.
    - ``max_policy_lag``: steps from policies more than this many versions behind the current one
      are masked out of the losses (None keeps all; the replay may already drop them).
    - ``digirl_lam``: λ of DigiRL's doubly-robust advantage. ``curriculum_top_fraction``: DigiRL
      keeps trajectories in this top fraction of return − V_traj(instruction) (DigiRL: 0.1 over its
      whole buffer; here over each batch). ``awr_threshold``: DigiRL's advantage cut (0.05).
    - ``entity_dropout``/``word_dropout``: word dropout in the update's forward pass (see
      Policy.with_word_dropout; scoring policies only). It keeps RL from unlearning the grounding
      that generalises to held-out tasks (measured: held-out success ~0.55 vs ~0.48 after 20
      rounds), at the price of noisier ratios (π is evaluated on perturbed prompts); 0 disables it.
    - ``weight_average_decay``: the learner publishes (and the local loop acts with and evaluates)
      an exponential moving average of its weights with this decay (~1/(1-decay) updates), not
      the raw weights of the last update; 0 publishes the raw weights. See learner/averaging.py
      and docs/performance.md for the measurement behind the default.
    - ``group_use_std``/``group_step_weight``/``clip_eps`` (gigpo only): divide by the group's std
      when normalising returns within a group (False: subtract the group mean only); ω, the weight
      of the step-level (anchor-state) advantage added to the episode-level one; ε of the clipped
      ratio clip(π/μ, 1 − ε, 1 + ε). Groups are the batch's episodes of one task collected by one
      policy version (see ``objectives.group_ids``), so feed it whole groups of whole episodes
      (``LoopConfig.group_size``). Uses no critic: ``critic_warmup_updates`` does not apply, and
      the value heads are not trained. Uniform priorities, like the other baselines.
    - ``seed``: seeds torch before each update's randomness-free computation (CPU determinism).
    - ``mixed_precision``: bfloat16 autocast on CUDA (ignored on CPU).
    """

    algorithm: Algorithm = "aride"
    gamma: float = 0.9
    lam: float = 0.95
    rho_max: float = 1.0
    c_max: float = 1.0
    actor_lr: float = 3e-4
    critic_lr: float = 1e-3
    weight_decay: float = 0.0
    micro_batch_size: int = 16
    actor_grad_clip: float = 1.0
    critic_grad_clip: float = 1.0
    entropy_coef: float = 0.01
    invalid_penalty: float = 0.1
    repeat_penalty: float = 0.1
    trajectory_critic_coef: float = 1.0
    critic_warmup_updates: int = 20
    normalize_advantages: bool = True
    positive_advantages_only: bool = True
    w1: float = 1.0
    w2: float = 0.5
    w3: float = 0.1
    priority_eps: float = 1e-3
    beta_start: float = 0.4
    beta_end: float = 1.0
    beta_anneal_updates: int = 2000
    max_policy_lag: int | None = None
    digirl_lam: float = 0.5
    curriculum_top_fraction: float = 0.1
    awr_threshold: float = 0.05
    group_use_std: bool = True
    group_step_weight: float = 1.0
    clip_eps: float = 0.2
    entity_dropout: float = 0.5
    word_dropout: float = 0.1
    weight_average_decay: float = 0.99
    seed: int = 0
    mixed_precision: bool = True

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        problems = _type_problems(self)
        if problems:  # the range checks below would fail with a TypeError naming no field
            raise ValueError("LearnerConfig: " + "; ".join(problems))
        if self.algorithm not in ALGORITHMS:
            problems.append(f"algorithm must be one of {ALGORITHMS}, got {self.algorithm!r}")
        for name in (
            "gamma",
            "lam",
            "digirl_lam",
            "beta_start",
            "beta_end",
            "entity_dropout",
            "word_dropout",
            "clip_eps",
        ):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                problems.append(f"{name} must be in [0, 1], got {value}")
        if not 0.0 <= self.weight_average_decay < 1.0:
            problems.append(
                f"weight_average_decay must be in [0, 1) (0 = publish raw weights), got {self.weight_average_decay}"
            )
        if not 0.0 < self.curriculum_top_fraction <= 1.0:
            problems.append(f"curriculum_top_fraction must be in (0, 1], got {self.curriculum_top_fraction}")
        for name in ("actor_lr", "critic_lr", "rho_max", "c_max", "priority_eps"):
            if not getattr(self, name) > 0:
                problems.append(f"{name} must be > 0, got {getattr(self, name)}")
        for name in (
            "weight_decay", "actor_grad_clip", "critic_grad_clip", "entropy_coef", "invalid_penalty",
            "repeat_penalty", "trajectory_critic_coef", "w1", "w2", "w3", "group_step_weight",
        ):  # fmt: skip
            if getattr(self, name) < 0:
                problems.append(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.micro_batch_size < 1 or self.beta_anneal_updates < 0 or self.critic_warmup_updates < 0:
            problems.append(
                "micro_batch_size must be >= 1; beta_anneal_updates and critic_warmup_updates >= 0"
            )
        if self.max_policy_lag is not None and self.max_policy_lag < 0:
            problems.append(f"max_policy_lag must be None or >= 0, got {self.max_policy_lag}")
        if problems:
            raise ValueError("LearnerConfig: " + "; ".join(problems))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _type_problems(config: LearnerConfig) -> list[str]:
    """Fields whose value is not of the default's kind (numbers finite), e.g. `actor_lr='abc'`."""
    problems = []
    for f in fields(config):
        default, value = f.default, getattr(config, f.name)
        if isinstance(default, bool) or f.name == "algorithm":
            ok = isinstance(value, bool) or f.name == "algorithm"
            kind = "true or false"
        elif isinstance(default, float):
            ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
            kind = "a finite number"
        elif f.name == "max_policy_lag":
            ok = value is None or (isinstance(value, int) and not isinstance(value, bool))
            kind = "an integer or null"
        else:
            ok = isinstance(value, int) and not isinstance(value, bool)
            kind = "an integer"
        if not ok:
            problems.append(f"{f.name} must be {kind}, got {value!r}")
    return problems
