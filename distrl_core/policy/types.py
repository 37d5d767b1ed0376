"""The data a policy takes and returns."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from distrl_core.envs.actions import Action

__all__ = ["ActOutput", "EvalOutput", "StepInput"]


@dataclass(frozen=True)
class ActOutput:
    """What the policy did at one step.

    ``raw_text``: the model's output (generative) or the chosen candidate's action text (scoring).
    ``logprob``: log μ(a|s) of exactly that output under the acting distribution (tempered).
    ``token_count``: tokens generated, or tokens of the chosen candidate's segment.
    ``entropy``: entropy of the acting distribution (over candidates, or summed over generated
    tokens). ``value``: the critic's V(s). ``extras``: mode-specific facts (candidate count...).
    """

    raw_text: str
    action: Action
    logprob: float
    token_count: int
    entropy: float
    value: float
    extras: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class StepInput:
    """One stored step as the learner sees it (the columns of a step row the policy needs).

    ``history`` holds the canonical texts of the episode's previous actions (oldest first); the
    policy shows the last ``PolicyConfig.history`` of them. ``raw_output`` and ``token_count`` are
    what generative policies re-score; ``action`` is what scoring policies look up.
    """

    instruction: str
    observation_text: str
    action: str
    raw_output: str = ""
    token_count: int = 0
    history: tuple[str, ...] = ()
    screenshot_png: bytes | None = None


@dataclass
class EvalOutput:
    """The learner's view of a batch, (B, T) padded like the batch (0 / False at padding).

    ``logp``: log π of the stored action, with gradient (-inf where π cannot produce the stored
    action, e.g. an expert's action outside the candidate set; ``known`` is False there).
    ``entropy``: exact entropy of π at the step, with gradient. ``values``: V(s_t).
    ``traj_logits``: (B,) logit of P(success | instruction) from the trajectory critic.
    """

    logp: torch.Tensor
    entropy: torch.Tensor
    values: torch.Tensor
    traj_logits: torch.Tensor
    known: torch.Tensor
