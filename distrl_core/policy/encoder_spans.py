"""Candidates read in place: an encoder base scoring each candidate from the observation's own
top-layer states over the candidate's span (``EncoderSettings.candidates = "spans"``).

The observation text already holds every candidate's text where its screen element is (keys and
swipes at its end; ``prompt.scoring_segments``). Read there, a candidate's tokens have attended to
the instruction and to the screen around it in every layer, frozen and trained: the pair is
encoded jointly (a cross-encoder, as the tiny default's one pass is), where the "pooled" reading
encodes the candidate alone and can only compare two summaries. One forward per observation scores
all its candidates, and none is encoded on its own. The score comes from the tiny default's span
head (``PolicyHeads.candidate_scores``: an MLP on the span's mean and last state), with the
exact-match embedding added over the span.

A candidate cut off by ``max_tokens`` is read at the final [SEP] token (so acting and learning
still agree); the observations here stay well under the cap (Web Shopping's longest: ~170 of 256).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from distrl_core.algos.entropy import candidate_entropy, candidate_log_probs
from distrl_core.policy.encoder import EncoderBackbone
from distrl_core.policy.parts import ActingParts
from distrl_core.policy.scoring import ScoredSteps
from distrl_core.policy.tokenizer import FLAG_OTHER

if TYPE_CHECKING:  # encoder_scoring imports this module to dispatch on the reading
    from distrl_core.policy.encoder_scoring import EncoderStep

__all__ = ["score_span_steps", "token_spans"]


def token_spans(
    offsets: Sequence[tuple[int, int]], char_spans: Sequence[tuple[int, int]]
) -> list[tuple[int, int]]:
    """Each character span [a, b) as the [start, end) of the tokens overlapping it, in the ids of
    ``offsets`` (a tokenizer's offset mapping with (0, 0) at special tokens: [CLS] first, [SEP]
    last); a span with no token left (cut by truncation) reads the final token."""
    real = [i for i, (a, b) in enumerate(offsets) if b > a]
    starts = [offsets[i][0] for i in real]
    ends = [offsets[i][1] for i in real]
    out = []
    for a, b in char_spans:
        first = bisect.bisect_right(ends, a)  # first token ending after a
        stop = bisect.bisect_left(starts, b)  # tokens starting before b
        if stop > first:
            out.append((real[first], real[stop - 1] + 1))
        else:
            out.append((len(offsets) - 1, len(offsets)))
    return out


def score_span_steps(parts: ActingParts, steps: Sequence[EncoderStep]) -> ScoredSteps:
    """π over each step's candidates, V(s) and the trajectory logit; gradients flow unless disabled."""
    backbone = parts.model
    assert isinstance(backbone, EncoderBackbone)
    device = parts.device
    first_step = {s.observation: s for s in reversed(steps)}  # any step of each observation
    observations = list(dict.fromkeys(s.observation for s in steps))
    per_text = backbone.top_states(backbone.frozen_states(observations))
    hidden = torch.nn.utils.rnn.pad_sequence(per_text, batch_first=True)  # (O, T, D)
    # [CLS] + "task : <instruction>" per observation (its tokenisation less [SEP])
    first = [len(backbone.token_ids(o[: first_step[o].instruction_chars])) - 1 for o in observations]
    row_of = {o: i for i, o in enumerate(observations)}
    rows = torch.tensor([row_of[s.observation] for s in steps], device=device)

    width = max(len(s.candidates) for s in steps)
    starts = torch.zeros(len(steps), width, dtype=torch.long)
    ends = torch.ones(len(steps), width, dtype=torch.long)  # padding reads token 0: masked out
    token_flags = torch.full((len(steps), hidden.shape[1]), FLAG_OTHER, dtype=torch.long)
    for i, step in enumerate(steps):
        spans = token_spans(backbone.token_offsets(step.observation), step.spans)
        for k, ((a, b), flag) in enumerate(zip(spans, step.flags, strict=True)):
            starts[i, k], ends[i, k] = a, b
            token_flags[i, a:b] = flag
    starts, ends = starts.to(device), ends.to(device)
    counts = torch.tensor([len(s.candidates) for s in steps], device=device)
    cand_mask = torch.arange(width, device=device)[None, :] < counts[:, None]

    step_hidden = hidden[rows]  # (N, T, D)
    if parts.heads.match is not None:
        step_hidden = step_hidden + parts.heads.match(token_flags.to(device)).to(step_hidden.dtype)
    scores = parts.heads.candidate_scores(step_hidden, starts, ends) / parts.config.temperature

    u = torch.stack([top.mean(0) for top in per_text])  # (O, D)
    q = torch.stack([top[:f].mean(0) for top, f in zip(per_text, first, strict=True)])  # (O, D)
    if parts.config.critic != "shared":
        u, q = u.detach(), q.detach()
    return ScoredSteps(
        log_probs=candidate_log_probs(scores, cand_mask),
        entropy=candidate_entropy(scores, cand_mask),
        values=parts.heads.state_value(u[rows]),
        traj_logits=parts.heads.trajectory_logit(q[rows]),
        cand_mask=cand_mask,
        span_lengths=(ends - starts) * cand_mask,
    )
