"""What the acting modes (candidate scoring, generation) read of a policy, in one narrow type."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from distrl_core.policy.config import PolicyConfig
from distrl_core.policy.heads import PolicyHeads
from distrl_core.policy.prompt import EncodedStep

__all__ = ["ActingParts"]


@dataclass(frozen=True)
class ActingParts:
    """The networks and settings an acting mode reads, handed to it explicitly by ``Policy.parts()``
    so that ``scoring`` and ``generative`` depend on this and not on the whole ``Policy``.

    Built per call: it carries the policy's word-dropout setting of that moment (``model.training``
    is read from the model itself).

    Example::

        parts = policy.parts()
        outputs = scoring.act_scoring(parts, observations, greedy=True, generator=policy.generator)
        flat = generative.evaluate_generative(parts, steps)
    """

    config: PolicyConfig  # temperature, critic, history, max_new_tokens
    model: nn.Module
    heads: PolicyHeads
    tokenizer: Any
    device: torch.device
    # (instruction, ui_text, history) -> the scoring prompt with its candidates (cached by the policy)
    encode: Callable[[str, str, Sequence[str]], EncodedStep]
    processor: Any = None  # vision-language bases: their AutoProcessor
    # (entity, other, phrasing) probabilities: see Policy.with_word_dropout
    word_dropout: tuple[float, float, float] = (0.0, 0.0, 0.0)
    dropout_token_id: int | None = None  # what a dropped word becomes: see scoring.dropout_token_id
    # A prompt's (L, E) contextual states of a frozen encoder (``policy.context_states``), or None
    # when the policy reads none.
    context: Callable[[EncodedStep], torch.Tensor] | None = None
