"""The learner's hyper-parameters: one dataclass, every field documented and validated here.

Each field's note gives, where the papers' released configs set it, the reference value of DistRL
(DistRL-open ``multimachine/default.yaml``) and DigiRL (``scripts/config/main/default.yaml``). The
tiny default policy learns with larger learning rates and looser clipping than a 1B-parameter
AutoUI/VLM; start from the reference values for those. The batch size (trajectories per update)
belongs to the caller (``LearnerParams.batch_size``, ``LoopConfig.batch_size``); the replay's
priority exponent α to ``storage.replay_config.ReplaySettings``. The importance-sampling exponent β
is annealed by the learner from the ``beta_*`` fields below (``Learner.beta_at``).
docs/architecture.md ("The learner's loss") has the formulas these fields enter.
"""

from __future__ import annotations

import math
from dataclasses import Field, asdict, dataclass, fields
from typing import Any, Literal, get_args

__all__ = ["ALGORITHMS", "DEFAULT_MICRO_BATCH_SIZE", "Algorithm", "LearnerConfig", "learner_config"]

Algorithm = Literal["aride", "digirl", "filtered_bc", "gigpo", "decoupled_ppo"]
"""The training methods the learner implements (the one list of them)."""
ALGORITHMS: tuple[Algorithm, ...] = get_args(Algorithm)
ProximalPolicy = Literal["update_start", "average"]
"""Where decoupled PPO's proximal policy comes from (``LearnerConfig.proximal_policy``)."""
PROXIMAL_POLICIES: tuple[str, ...] = get_args(ProximalPolicy)
DEFAULT_MICRO_BATCH_SIZE = 16
"""Trajectories per forward/backward when ``micro_batch_size`` is None and the policy sets none."""


@dataclass
class LearnerConfig:
    """Hyper-parameters of ``Learner.update``; validated on construction (one ``ValueError``
    naming every bad field).

    The fields between "Retrace" and "decoupled PPO" below are read by the algorithms' losses, each
    loss its own slice of them (``distrl_core/learner/losses/``: ``ARideConfig``, ``GiGPOConfig``,
    ...); a field set away from its default for an algorithm whose loss does not read it is an
    error naming the algorithms that do. The others are the learner's, whatever the algorithm."""

    algorithm: Algorithm = "aride"
    """"aride": Retrace actor-critic with DPER priorities; "digirl": doubly-robust advantages,
    instruction curriculum, filtered AWR; "filtered_bc": successes only; "gigpo": critic-free
    group-relative advantages, GiGPO-style (``algos.group``); "decoupled_ppo": AReaL's decoupled
    PPO for stale data (``algos.decoupled``), on Retrace's advantages (``decoupled_retrace``)."""

    # --- Retrace (A-RIDE) ------------------------------------------------------------------------
    gamma: float = 0.9
    """Discount γ. DistRL 0.5, DigiRL 0.5."""
    lam: float = 0.95
    """Retrace trace λ. DistRL: 1, fixed in code."""
    rho_max: float = 1.0
    """Truncation of the ratio in the targets and the advantage (ρ̄). DistRL: clip_rho_threshold 1.0."""
    c_max: float = 1.0
    """Truncation of the ratio in the traces (c). DistRL: clip_pg_rho_threshold 1.0."""

    # --- optimisation ------------------------------------------------------------------------------
    actor_lr: float = 3e-4
    """AdamW learning rate of the actor (backbone, scoring head). DistRL lm_lr 1e-4, DigiRL 1e-4.
    The default was chosen on the validation split (docs/performance.md)."""
    backbone_lr: float | None = None
    """AdamW learning rate of a pretrained base's trained backbone weights (a LoRA adapter, an
    encoder's trained top layers); the heads keep ``actor_lr``. None: the base's default
    (``policy.defaults``: 1e-4 for a LoRA base, 5e-5 for an encoder); on the tiny model a value
    here gives its decoder this rate, apart from the heads."""
    critic_lr: float = 1e-3
    """AdamW learning rate of the critics (value head, trajectory critic). DistRL 1e-4, DigiRL 1e-4."""
    weight_decay: float = 0.0
    """AdamW weight decay of both optimisers."""
    micro_batch_size: int | None = None
    """Trajectories per forward/backward; a larger batch is accumulated over micro-batches. None:
    the policy's default (``PRETRAINED.micro_batch_size`` on a pretrained base,
    ``DEFAULT_MICRO_BATCH_SIZE`` = 16 on the tiny model); a value set here is used as it is."""
    actor_grad_clip: float = 1.0
    """Max global gradient norm of the actor (0 = no clip). DistRL max_grad_norm 0.01, DigiRL 0.01."""
    critic_grad_clip: float = 1.0
    """Max global gradient norm of the critics (0 = no clip). DistRL 0.01, DigiRL 0.01."""

    # --- actor loss terms ------------------------------------------------------------------------
    entropy_coef: float = 0.01
    """Weight of the entropy bonus (β of the entropy term in the actor loss)."""
    invalid_penalty: float = 0.1
    """Pushes down invalid actions (see ``algos.losses``)."""
    repeat_penalty: float = 0.1
    """Pushes down actions repeated on an unchanged screen (see ``algos.losses``)."""
    trajectory_critic_coef: float = 1.0
    """Weight of the trajectory critic's binary cross-entropy in the critic loss."""
    critic_warmup_updates: int = 20
    """The first updates train only the critics: a fresh (or warm-started) critic is far off the new
    policy's returns, and advantages from it would push every action of the first failed episodes
    down at once."""
    normalize_advantages: bool = True
    """Centre and scale the Retrace advantages over the batch's steps before they weight log π.
    With ``positive_advantages_only`` this is the one deliberate deviation from the A-RIDE actor
    loss −mean(w·A·log π) as written; set both False for the exact loss (``--methods aride_pure`` in
    bench/learning_curve.py). docs/architecture.md says why, docs/performance.md what it measured."""
    positive_advantages_only: bool = True
    """Clamp the advantages to their positive part (DistRL's released trainer also clamps its
    advantages to [0, 1]); bad actions are then pushed down by the invalid/repeat penalties only.
    Applies to "aride" and "decoupled_ppo" (its advantages normalised by
    ``normalize_advantages`` first, as A-RIDE's): with signed advantages both collapse this policy below its warm
    start (docs/performance.md)."""

    # --- DPER priorities and importance sampling ---------------------------------------------------
    w1: float = 1.0
    """Weight of mean|δ| in the priority p = w1·mean|δ| + w2·mean ρ̄ + w3·mean H + ε. DistRL dper_w1 50."""
    w2: float = 0.5
    """Weight of mean ρ̄ in the priority."""
    w3: float = 0.1
    """Weight of the mean entropy H in the priority."""
    priority_eps: float = 1e-3
    """ε of the priority: keeps every trajectory sampleable."""
    beta_start: float = 0.4
    """Importance-sampling exponent β at the first update (DistRL's prioritized sampler is unused in
    its code)."""
    beta_end: float = 1.0
    """β once annealing is over (1 = full correction)."""
    beta_anneal_updates: int = 2000
    """Learner updates over which β goes linearly from ``beta_start`` to ``beta_end``."""
    max_policy_lag: int | None = None
    """Steps from policies more than this many versions behind the current one are masked out of the
    losses (None keeps all; the replay may already drop them)."""

    # --- DigiRL -------------------------------------------------------------------------------------
    digirl_lam: float = 0.5
    """λ of DigiRL's doubly-robust advantage."""
    curriculum_top_fraction: float = 0.1
    """DigiRL keeps the trajectories in this top fraction of return − V_traj(instruction) (DigiRL:
    0.1 over its whole buffer; here over each batch)."""
    awr_threshold: float = 0.05
    """DigiRL's advantage cut of the filtered AWR (DigiRL: 0.05)."""

    # --- GiGPO-style group baseline (algorithm "gigpo" only) ----------------------------------------
    group_use_std: bool = True
    """Divide by the group's std when normalising returns within a group (False: subtract the group
    mean only). Groups are the batch's episodes of one task collected by one policy version
    (``losses.gigpo.group_ids``), so feed whole groups of whole episodes (``LoopConfig.group_size``).
    No critic is used: ``critic_warmup_updates`` does not apply, the value heads are not trained,
    and priorities are uniform, as for the other baselines."""
    group_step_weight: float = 1.0
    """ω, the weight of the step-level (anchor-state) advantage added to the episode-level one."""
    clip_eps: float = 0.2
    """ε of the clipped ratio clip(π/μ, 1 − ε, 1 + ε)."""

    # --- decoupled PPO (algorithm "decoupled_ppo" only; its ratio is clipped with clip_eps) ---------
    proximal_policy: ProximalPolicy = "update_start"
    """π_prox, the centre of the trust region: "update_start", the learner's weights when the update
    starts (one optimiser step per batch, so r = π_θ/π_prox is 1 at the step and the loss is the
    behaviour-weighted policy gradient); "average", the published moving average of the weights
    (``weight_average_decay``; one more forward pass without gradient per micro-batch), which keeps
    the raw weights within clip_eps of it."""
    proximal_weight_max: float = 2.0
    """w̄, the truncation of the behaviour weight w = min(π_prox/μ, w̄) (AReaL's
    behav_imp_weight_cap)."""
    decoupled_retrace: bool = True
    """Decoupled PPO's advantages and critic targets from Retrace (ρ = π/μ, as "aride") and its
    replay priorities from DPER; False: G_t − V(s_t) from the behaviour data (AReaL's estimator)
    with uniform priorities. The clipped ratio and behaviour weight are the same either way. Chosen
    on validation: with False decoupled PPO never rose above its warm start (docs/performance.md,
    "Decoupled PPO as data grows stale")."""

    # --- MobileRL-style options (docs/architecture.md, "MobileRL-style options"; 0 = off) -----------
    positive_replay_strength: float = 0.0
    """κ of difficulty-adaptive positive replay: a success's priority is multiplied by
    1 + κ·(1 − p̂), p̂ its task's success rate so far ((successes + 1)/(attempts + 2)); 0 = off."""
    failure_curriculum_attempts: int = 0
    """N of failure-curriculum filtering: a task tried N times and never solved is collected (in
    the local loop) and replayed with weight ``failure_curriculum_floor``; 0 = off."""
    failure_curriculum_floor: float = 0.1
    """φ in (0, 1], the weight of a task given up on (keeps it tried now and then)."""
    failure_curriculum_reset_updates: int = 200
    """Every this many learner updates the counts of never-solved tasks are forgotten, so they are
    retried at full weight for N more attempts (0 = never; the floor alone retries them)."""
    shortest_path_exponent: float = 0.0
    """η of the shortest-path reward: a success of length L earns r·(L_min/L)^η, L_min the shortest
    success seen for its task (1 = MobileRL's L_min/L); 0 = off. Needs whole episodes."""

    # --- regularisation of the update's forward pass --------------------------------------------------
    entity_dropout: float = 0.5
    """Probability of replacing a word shared by the instruction and the screen with an unknown
    token in the update's forward pass (scoring policies only; see ``Policy.with_word_dropout``). It keeps RL from unlearning the grounding that
    generalises to held-out tasks, at the price of noisier ratios (π is evaluated on perturbed
    prompts); 0 disables it."""
    word_dropout: float = 0.1
    """The same for the other words; 0 disables it."""
    phrasing_dropout: float | None = None
    """The same for the instruction's words that are not on the screen (its phrasing: verbs,
    fillers), as the words of an unseen phrasing reach the model as unknown tokens; None: as
    ``word_dropout`` (so ``word_dropout=0`` still turns all word dropout off)."""
    weight_average_decay: float = 0.99
    """The learner publishes (and the local loop acts with and evaluates) an exponential moving
    average of its weights with this decay (~1/(1 − decay) updates), not the raw weights of the last
    update; 0 publishes the raw weights. See ``learner/averaging.py``; docs/performance.md has the
    measurement behind the default."""

    # --- execution ---------------------------------------------------------------------------------------
    seed: int = 0
    """Seeds torch before each update's randomness-free computation (CPU determinism)."""
    mixed_precision: bool = True
    """bfloat16 autocast on CUDA (ignored on CPU)."""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        problems = _type_problems(self)
        if not problems:  # the range checks would fail with a TypeError naming no field
            problems = [
                *_choice_problems(self),
                *_interval_problems(self),
                *_sign_problems(self),
                *_count_problems(self),
                *_foreign_field_problems(self),
            ]
        if problems:
            raise ValueError("LearnerConfig: " + "; ".join(problems))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_UNIT_INTERVAL = (
    "gamma", "lam", "digirl_lam", "beta_start", "beta_end", "entity_dropout", "word_dropout",
    "phrasing_dropout", "clip_eps",
)  # fmt: skip
_POSITIVE = ("actor_lr", "critic_lr", "rho_max", "c_max", "priority_eps", "proximal_weight_max")
_NON_NEGATIVE = (
    "weight_decay", "actor_grad_clip", "critic_grad_clip", "entropy_coef", "invalid_penalty",
    "repeat_penalty", "trajectory_critic_coef", "w1", "w2", "w3", "group_step_weight",
    "positive_replay_strength", "shortest_path_exponent",
)  # fmt: skip


def _type_problems(config: LearnerConfig) -> list[str]:
    """Fields whose value is not of the default's kind (numbers finite), e.g. `actor_lr='abc'`."""
    problems = []
    for f in fields(config):
        value = getattr(config, f.name)
        ok, kind = _of_kind(f, value)
        if not ok:
            problems.append(f"{f.name} must be {kind}, got {value!r}")
    return problems


def _of_kind(f: Field[Any], value: Any) -> tuple[bool, str]:
    """Whether `value` has the kind of field `f`'s default, and that kind in words."""
    if f.name in ("algorithm", "proximal_policy"):  # checked by _choice_problems
        return True, "one of its choices"
    if isinstance(f.default, bool):
        return isinstance(value, bool), "true or false"
    if isinstance(f.default, float):
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return number and math.isfinite(value), "a finite number"
    integer = isinstance(value, int) and not isinstance(value, bool)
    if f.name in ("max_policy_lag", "micro_batch_size"):
        return value is None or integer, "an integer or null"
    if f.name in ("phrasing_dropout", "backbone_lr"):
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return value is None or (number and math.isfinite(value)), "a finite number or null"
    return integer, "an integer"


def _choice_problems(config: LearnerConfig) -> list[str]:
    if config.algorithm not in ALGORITHMS:
        return [f"algorithm must be one of {ALGORITHMS}, got {config.algorithm!r}"]
    if config.proximal_policy not in PROXIMAL_POLICIES:
        return [f"proximal_policy must be one of {PROXIMAL_POLICIES}, got {config.proximal_policy!r}"]
    return []


def _interval_problems(config: LearnerConfig) -> list[str]:
    """Probabilities, discounts and decays: each in its interval."""
    problems = [
        f"{name} must be in [0, 1], got {value}"
        for name in _UNIT_INTERVAL
        if (value := getattr(config, name)) is not None and not 0.0 <= value <= 1.0
    ]
    if not 0.0 <= config.weight_average_decay < 1.0:
        problems.append(
            f"weight_average_decay must be in [0, 1) (0 = publish raw weights), got {config.weight_average_decay}"
        )
    if not 0.0 < config.failure_curriculum_floor <= 1.0:
        problems.append(f"failure_curriculum_floor must be in (0, 1], got {config.failure_curriculum_floor}")
    if not 0.0 < config.curriculum_top_fraction <= 1.0:
        problems.append(f"curriculum_top_fraction must be in (0, 1], got {config.curriculum_top_fraction}")
    return problems


def _sign_problems(config: LearnerConfig) -> list[str]:
    """Rates and truncations must be positive; weights, clips and penalties not negative."""
    problems = [
        f"{name} must be > 0, got {getattr(config, name)}"
        for name in _POSITIVE
        if not getattr(config, name) > 0
    ]
    problems += [
        f"{name} must be >= 0, got {getattr(config, name)}"
        for name in _NON_NEGATIVE
        if getattr(config, name) < 0
    ]
    if config.backbone_lr is not None and not config.backbone_lr > 0:
        problems.append(f"backbone_lr must be > 0 or null (the base's default), got {config.backbone_lr}")
    return problems


def _count_problems(config: LearnerConfig) -> list[str]:
    """Sizes and numbers of updates."""
    problems = []
    micro = config.micro_batch_size
    if (
        (micro is not None and micro < 1)
        or config.beta_anneal_updates < 0
        or config.critic_warmup_updates < 0
    ):
        problems.append(
            "micro_batch_size must be None or >= 1; beta_anneal_updates and critic_warmup_updates >= 0"
        )
    if config.failure_curriculum_attempts < 0 or config.failure_curriculum_reset_updates < 0:
        problems.append(
            "failure_curriculum_attempts and failure_curriculum_reset_updates must be >= 0 (0 = off)"
        )
    if config.max_policy_lag is not None and config.max_policy_lag < 0:
        problems.append(f"max_policy_lag must be None or >= 0, got {config.max_policy_lag}")
    return problems


def _foreign_field_problems(config: LearnerConfig) -> list[str]:
    """Fields set away from their default for an algorithm whose loss does not read them (they
    would do nothing), each naming the algorithms that read it."""
    # Imported here: the losses import this module (for `Algorithm`).
    from distrl_core.learner.losses import field_readers

    defaults = LearnerConfig.__dataclass_fields__
    return [
        f"{name}={value!r} is read only by {' and '.join(readers)}, not by algorithm "
        f"{config.algorithm!r}: leave it at its default ({defaults[name].default!r}) or set algorithm"
        for name, readers in field_readers().items()
        if config.algorithm not in readers and (value := getattr(config, name)) != defaults[name].default
    ]


def learner_config(algorithm: Algorithm, seed: int, overrides: dict[str, Any]) -> LearnerConfig:
    """LearnerConfig from an algorithm and a seed plus field overrides (validated), as the `learn`
    and `retrain` flows take them."""
    known = {f.name for f in fields(LearnerConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"learner_config: unknown field(s) {unknown}; LearnerConfig has {sorted(known)}")
    if {"algorithm", "seed"} & set(overrides):
        raise ValueError(
            "learner_config: set `algorithm` and `seed` as parameters of their own, not overrides"
        )
    values: dict[str, Any] = {"algorithm": algorithm, "seed": seed} | overrides  # names checked above
    return LearnerConfig(**values)
