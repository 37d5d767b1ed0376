"""Candidate scoring with an encoder base: the observation encoded once, each candidate separately.

A step reads as one observation text (``task : <instruction> | did : ... | <every screen element>``)
and one short text per candidate (``Switch Wi-Fi on``, ``key BACK``). Scoring each (observation,
candidate) pair jointly would forward the observation once per candidate (~20x the cost); apart,
the observation is forwarded once and candidate texts, which repeat across steps, come from the
frozen-state cache and are deduplicated within a batch. The pair is scored from

- ``q``: the mean of the top layer's states over ``[CLS]`` and the instruction's tokens (which
  attend to the whole screen), and ``v``: the candidate's mean-pooled state, both unit-normalised
  and scaled by sqrt(D), plus the match embedding of whether the candidate shares a word with the
  instruction (the exact-match feature the tiny default also has);
- ``PolicyHeads.score`` on ``[q * v; v]``: a learned weighted dot product plus a prior per candidate.

The critics read ``u``, the mean over the whole observation (value), and ``q`` (trajectory).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from distrl_core.algos.entropy import candidate_entropy, candidate_log_probs
from distrl_core.envs.observation import Observation
from distrl_core.policy.candidates import Candidate, find_candidate
from distrl_core.policy.encoder import EncoderBackbone, length_sorted_chunks
from distrl_core.policy.encoder_spans import score_span_steps
from distrl_core.policy.parts import ActingParts
from distrl_core.policy.prompt import SEPARATOR, scoring_segments
from distrl_core.policy.scoring import ScoredSteps, sample_actions
from distrl_core.policy.tokenizer import FLAG_MATCH, FLAG_OTHER, shares_words
from distrl_core.policy.types import ActOutput, StepInput

__all__ = ["EncoderStep", "act_encoder", "encoder_step", "evaluate_encoder", "score_encoder_steps"]


@dataclass(frozen=True)
class EncoderStep:
    observation: str  # the observation text
    instruction_chars: int  # its first characters that are "task : <instruction>"
    candidates: tuple[Candidate, ...]
    flags: tuple[int, ...]  # per candidate: FLAG_MATCH when it shares a word with the instruction
    spans: tuple[tuple[int, int], ...]  # per candidate: its [start, end) characters in observation

    def index_of(self, action_text: str, screen_size: tuple[int, int] = (1080, 2400)) -> int | None:
        return find_candidate(self.candidates, action_text, screen_size)


@functools.lru_cache(maxsize=1 << 15)
def encoder_step(
    instruction: str, ui_text: str, history: tuple[str, ...], screen_size: tuple[int, int]
) -> EncoderStep:
    """The observation text and candidates of a step (a pure function of the stored row)."""
    segments, owners, candidates = scoring_segments(instruction, ui_text, history, screen_size)
    flags = tuple(FLAG_MATCH if shares_words(instruction, c.text) else FLAG_OTHER for c in candidates)
    spans: list[tuple[int, int]] = [(0, 0)] * len(candidates)
    start = 0
    for segment, owner in zip(segments, owners, strict=True):
        if owner is not None:
            spans[owner] = (start, start + len(segment))
        start += len(segment) + len(SEPARATOR)
    return EncoderStep(SEPARATOR.join(segments), len(segments[0]), tuple(candidates), flags, tuple(spans))


def _instruction_tokens(backbone: EncoderBackbone, step: EncoderStep) -> int:
    """Tokens of [CLS] + "task : <instruction>" at the start of the observation's encoding."""
    return len(backbone.token_ids(step.observation[: step.instruction_chars])) - 1  # less [SEP]


def _pooled(
    backbone: EncoderBackbone,
    texts: Sequence[str],
    prefix_tokens: Sequence[int] | None,
    *,
    mean_detached: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Mean of the top layer's states per text (N, D), and over its first ``prefix_tokens`` (N, D).

    With ``mean_detached`` (the caller detaches the mean: a critic that does not train the encoder)
    and gradients on, the mean comes from a forward without gradients and only the prefix is
    differentiated, through the last layer at the prefix positions alone (``top_prefix``): the same
    values, and about half the learner's cost of the top layer."""
    states = backbone.frozen_states(texts)
    split = mean_detached and prefix_tokens is not None and torch.is_grad_enabled()
    with torch.no_grad() if split else contextlib.nullcontext():
        tops = backbone.top_states(states)
    pooled = torch.stack([top.mean(0) for top in tops])
    if prefix_tokens is None:
        return pooled, None
    widths = [min(p, len(s)) for p, s in zip(prefix_tokens, states, strict=True)]
    if not split:
        return pooled, torch.stack([top[:w].mean(0) for top, w in zip(tops, widths, strict=True)])
    prefixes: list[torch.Tensor] = [torch.empty(0)] * len(texts)
    for chunk in length_sorted_chunks([len(s) for s in states]):
        hidden = backbone.top_prefix([states[i] for i in chunk], max(widths[i] for i in chunk))
        for j, i in enumerate(chunk):
            prefixes[i] = hidden[j, : widths[i]].mean(0)
    return pooled, torch.stack(prefixes)


def _unit(x: torch.Tensor) -> torch.Tensor:
    unit: torch.Tensor = torch.nn.functional.normalize(x, dim=-1) * x.shape[-1] ** 0.5
    return unit


def score_encoder_steps(parts: ActingParts, steps: Sequence[EncoderStep]) -> ScoredSteps:
    """π over each step's candidates, V(s) and the trajectory logit; gradients flow unless disabled."""
    if parts.config.encoder is not None and parts.config.encoder.candidates == "spans":
        return score_span_steps(parts, steps)
    backbone = parts.model
    assert isinstance(backbone, EncoderBackbone)
    observations = list(dict.fromkeys(s.observation for s in steps))
    candidate_texts = list(dict.fromkeys(c.text for s in steps for c in s.candidates))
    first = {s.observation: _instruction_tokens(backbone, s) for s in steps}
    # The actor reads q; the critic reads u and q, with gradients only when it is "shared".
    detached = parts.config.critic != "shared"
    u, q = _pooled(backbone, observations, [first[o] for o in observations], mean_detached=detached)
    assert q is not None
    v, _ = _pooled(backbone, candidate_texts, None)
    obs_index = {o: i for i, o in enumerate(observations)}
    cand_index = {t: i for i, t in enumerate(candidate_texts)}

    device = parts.device
    width = max(len(s.candidates) for s in steps)
    rows = torch.tensor([obs_index[s.observation] for s in steps], device=device)
    index = torch.zeros(len(steps), width, dtype=torch.long)
    flags = torch.zeros(len(steps), width, dtype=torch.long)
    counts = torch.tensor([len(s.candidates) for s in steps])
    for i, s in enumerate(steps):
        index[i, : len(s.candidates)] = torch.tensor([cand_index[c.text] for c in s.candidates])
        flags[i, : len(s.candidates)] = torch.tensor(s.flags)
    index, flags = index.to(device), flags.to(device)
    cand_mask = torch.arange(width, device=device)[None, :] < counts.to(device)[:, None]

    query = _unit(q)[rows]  # (N, D)
    cands = _unit(v)[index]  # (N, K, D)
    if parts.heads.match is not None:
        cands = cands + parts.heads.match(flags)
    features = torch.cat([query[:, None, :] * cands, cands], dim=-1)
    scores = parts.heads.score(features).squeeze(-1) / parts.config.temperature

    critic_u, critic_q = u[rows], q[rows]
    if parts.config.critic != "shared":
        critic_u, critic_q = critic_u.detach(), critic_q.detach()
    token_counts = torch.tensor([len(backbone.token_ids(t)) for t in candidate_texts], device=device)
    return ScoredSteps(
        log_probs=candidate_log_probs(scores, cand_mask),
        entropy=candidate_entropy(scores, cand_mask),
        values=parts.heads.state_value(critic_u),
        traj_logits=parts.heads.trajectory_logit(critic_q),
        cand_mask=cand_mask,
        span_lengths=token_counts[index] * cand_mask,
    )


def _steps(parts: ActingParts, rows: Sequence[tuple[str, str, Sequence[str]]]) -> list[EncoderStep]:
    history = parts.config.history
    return [
        encoder_step(i, u, tuple(h[-history:]) if history > 0 else (), parts.config.screen_size)
        for i, u, h in rows
    ]


@torch.no_grad()
def act_encoder(
    parts: ActingParts, observations: Sequence[Observation], *, greedy: bool, generator: torch.Generator
) -> list[ActOutput]:
    steps = _steps(parts, [(o.instruction, o.ui_text, o.previous_actions) for o in observations])
    return sample_actions([s.candidates for s in steps], score_encoder_steps(parts, steps), greedy, generator)


def evaluate_encoder(parts: ActingParts, steps: Sequence[StepInput]) -> dict[str, torch.Tensor]:
    """Flat (N,) log π of each stored action, entropy, V(s), trajectory logit and ``known``."""
    encoded = _steps(parts, [(s.instruction, s.observation_text, s.history) for s in steps])
    scored = score_encoder_steps(parts, encoded)
    choice = [e.index_of(s.action, parts.config.screen_size) for e, s in zip(encoded, steps, strict=True)]
    known = torch.tensor([c is not None for c in choice], device=parts.device)
    index = torch.tensor([c or 0 for c in choice], device=parts.device)
    chosen = scored.log_probs.gather(1, index[:, None]).squeeze(1)
    return {
        "logp": torch.where(known, chosen, torch.full_like(chosen, float("-inf"))),
        "entropy": scored.entropy,
        "values": scored.values,
        "traj_logits": scored.traj_logits,
        "known": known,
    }
