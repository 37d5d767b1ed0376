"""Training settings that depend on the base: chosen from ``PolicyConfig.base``, printed once.

The tiny default (``base`` None) keeps every setting it always had: one learning rate for the
backbone and the heads, no warm-start micro-batching. A pretrained base differs in three ways:

- its backbone already knows language, and a LoRA adapter on it diverges at the learning rate
  that random tiny weights need (SmolLM2-135M: nothing learned in 12 SFT updates at 1e-3, loss
  2.76 -> 2.88 against a uniform guess of 2.82), while the freshly initialised heads need a large
  one: so two AdamW parameter groups, the adapter at ``backbone_lr``, the heads at the usual rate;
- it is ~1000x larger: one graph over 16 trajectories does not fit in memory (13 GB RSS for 4
  trajectories of SmolLM2), so gradients are accumulated over micro-batches of at most
  ``micro_batch_size`` trajectories and ``max_micro_batch_tokens`` prompt tokens;
- threads: measured on 2 cores, 2 torch threads were never faster than 1 and single-sequence
  scoring was 8x slower, so acting (collectors, evaluation) uses one thread per process; the
  learner uses the threads it is given (``DISTRL_LEARNER_THREADS``, default: torch's own).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from distrl_core.policy.config import PolicyConfig

__all__ = ["TrainingDefaults", "configure_threads", "describe_defaults", "training_defaults"]

ROLES = ("collector", "evaluator", "learner")


@dataclass(frozen=True)
class TrainingDefaults:
    """``backbone_lr``: learning rate of the trainable backbone weights (the LoRA adapter) in the
    warm start; ``learner_backbone_lr`` the same in RL updates (None: one group with the heads,
    at the configured rate). ``micro_batch_size``: trajectories per forward/backward in the warm
    start and cap of the learner's (None: the whole batch). ``max_micro_batch_tokens``: prompt
    tokens per micro-batch (None: no bound). ``acting_threads``: torch threads of an acting
    process."""

    backbone_lr: float | None
    learner_backbone_lr: float | None
    micro_batch_size: int | None
    max_micro_batch_tokens: int | None
    acting_threads: int = 1


TINY = TrainingDefaults(None, None, None, None)
# The feasibility run adapted SmolLM2-135M with LoRA at 1e-4..2e-4: the warm start takes the upper
# end (few updates), RL the lower (noisier gradients). Memory of a SmolLM2 warm-start step on 16
# one-step trajectories (~110 prompt tokens each), above the loaded model: 1.1 GB in micro-batches
# of 2, 5.2 GB in one graph (~3 MB per prompt token): 1,024 tokens per graph stay within ~3-4 GB.
PRETRAINED = TrainingDefaults(2e-4, 1e-4, 2, 1024)
# An encoder base (all-MiniLM-L6-v2): its trained top layer is pretrained too, so it gets a small
# rate (at the heads' 3e-4 it forgot what it knew on Web Shopping's validation split: 0 success for
# 9,000 env steps, 0.131 against 0.384 at 5e-5; docs/performance.md); its frozen layers run once
# per text (cached), so an update is a few top-layer forwards over the batch's distinct texts:
# whole batches fit (~0.4 GB for 36 steps), and splitting them would only forward shared candidate
# texts again.
ENCODER = TrainingDefaults(1e-4, 5e-5, None, None)


def training_defaults(config: PolicyConfig) -> TrainingDefaults:
    if config.base is None:
        return TINY
    return ENCODER if config.encoder is not None else PRETRAINED


def describe_defaults(config: PolicyConfig) -> str:
    """One line naming the base-dependent settings, for the logs and the command line."""
    values = asdict(training_defaults(config))
    kind = "tiny default" if config.base is None else f"pretrained base {config.base}"
    if config.subwords is not None:
        frozen = "trained" if config.subwords.train_embeddings else "frozen"
        kind += f" on the sub-words of {config.subwords.source} (projected embedding table, {frozen})"
        if config.subwords.semantic_match:
            scope = config.subwords.semantic_labels
            where = f"its {len(scope)} app names on a launcher" if scope else "every screen element"
            if config.subwords.semantic_paths:
                where += f" and the labels on the routes to {len(config.subwords.semantic_paths)} controls"
            if config.subwords.semantic_value_paths:
                where += (
                    f" ({len(config.subwords.semantic_value_paths)} of them, to a control taking a value,"
                    " read without the value)"
                )
            kind += f", with the encoder's similarity of {where} to the instruction"
    if config.vision:
        kind += " (vision-language: reads the screenshot, writes the action)"
    lora = "" if config.lora is None else f", LoRA r={config.lora.r} alpha={config.lora.alpha}"
    if config.encoder is not None:
        lora = (
            f", encoder with {config.encoder.trainable_layers} trained top layer(s), the rest frozen, "
            f"candidates read {config.encoder.candidates}"
        )
    shown = ", ".join(f"{k}={v}" for k, v in values.items() if v is not None)
    return f"{kind}{lora}: {shown or 'one learning rate, whole-batch updates'}"


def configure_threads(role: str) -> int:
    """Set torch's thread count for a process of this role and return it: 1 for acting roles,
    ``DISTRL_LEARNER_THREADS`` (or torch's default) for the learner."""
    import torch

    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    if role == "learner":
        wanted = int(os.environ.get("DISTRL_LEARNER_THREADS", "0") or 0)
        threads = wanted if wanted > 0 else torch.get_num_threads()
    else:
        threads = TINY.acting_threads
    torch.set_num_threads(threads)
    return threads
