"""Candidate scoring: one forward pass per step scores every candidate; π is the softmax over them.

log π and the entropy are exact over the candidate set. A candidate's score comes from the mean and
the last of its tokens' hidden states, so long candidates are not penalised the way a summed
token log-likelihood would penalise them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from distrl_core.algos.entropy import candidate_entropy, candidate_log_probs
from distrl_core.envs.observation import Observation
from distrl_core.policy.backbone import hf
from distrl_core.policy.parts import ActingParts
from distrl_core.policy.prompt import EncodedStep
from distrl_core.policy.tokenizer import FLAG_INSTRUCTION, FLAG_INSTRUCTION_MATCHED, FLAG_MATCH
from distrl_core.policy.types import ActOutput, StepInput

__all__ = [
    "ScoredSteps",
    "act_scoring",
    "dropout_token_id",
    "evaluate_scoring",
    "hidden_states",
    "pad_rows",
    "score_steps",
]


@dataclass
class ScoredSteps:
    log_probs: torch.Tensor  # (N, K) log π over candidates (-inf at padding)
    entropy: torch.Tensor  # (N,)
    values: torch.Tensor  # (N,)
    traj_logits: torch.Tensor  # (N,)
    cand_mask: torch.Tensor  # (N, K) bool
    span_lengths: torch.Tensor  # (N, K) tokens per candidate


def _pad(rows: Sequence[Sequence[int]], value: int, device: torch.device) -> torch.Tensor:
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), value, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out.to(device)


_END_MARKER = re.compile(r"(?i)end|eos|</s>|<\|im_")


def dropout_token_id(tokenizer: Any) -> int | None:
    """The token a dropped word becomes: [UNK] when it is a real unknown-word token (the tiny
    default's word-level tokenizer), else a dedicated mask token; None when there is neither. Byte-level BPE tokenizers never emit
    [UNK] and often name an end-of-text marker as their unk (SmolLM2: ``<|endoftext|>``): feeding
    that in place of words teaches the model that texts end mid-prompt, so it is never used."""
    specials = {
        getattr(tokenizer, name, None)
        for name in ("eos_token_id", "bos_token_id", "pad_token_id", "sep_token_id", "cls_token_id")
    }
    for name in ("unk_token", "mask_token"):
        token = getattr(tokenizer, name, None)
        token_id = getattr(tokenizer, f"{name}_id", None)
        usable = token is not None and token_id is not None and token_id not in specials
        if usable and not _END_MARKER.search(str(token)):
            return token_id
    return None


def _drop_mask(parts: ActingParts, ids: torch.Tensor, flags: torch.Tensor) -> torch.Tensor | None:
    """Training-time word dropout: words shared by the instruction and the screen (entities) are
    dropped with probability ``entity``, so the model learns to ground by the match flags rather
    than by memorising which entity goes with which words; the instruction's other words (its
    phrasing) with ``phrasing``, as an unseen phrasing's words reach the model as [UNK]; every
    other word with ``other``."""
    entity, other, phrasing = parts.word_dropout
    if not parts.model.training or (entity <= 0 and other <= 0 and phrasing <= 0):
        return None
    shared = (flags == FLAG_MATCH) | (flags == FLAG_INSTRUCTION_MATCHED)
    probability = torch.where(
        flags == FLAG_INSTRUCTION,
        torch.full_like(ids, 0, dtype=torch.float) + phrasing,
        torch.full_like(ids, 0, dtype=torch.float) + other,
    )
    probability = torch.where(shared, torch.full_like(probability, entity), probability)
    return torch.rand(ids.shape, device=ids.device) < probability


def _embed_with_dropout(parts: ActingParts, ids: torch.Tensor, drop: torch.Tensor | None) -> torch.Tensor:
    """Input embeddings; dropped words (``drop``, from ``_drop_mask``) become the dropout token (see
    ``dropout_token_id``), or a zero embedding (no content, position kept) when the tokenizer has no
    such token."""
    embed = hf(parts.model).get_input_embeddings()
    if drop is None:
        embedded: torch.Tensor = embed(ids)
        return embedded
    token_id = parts.dropout_token_id
    if token_id is not None:
        embedded = embed(torch.where(drop, torch.full_like(ids, token_id), ids))
        return embedded
    inputs: torch.Tensor = embed(ids)
    return inputs * (~drop)[..., None].to(inputs.dtype)


def _hidden_states(
    parts: ActingParts,
    ids: torch.Tensor,  # (N, L)
    flags: torch.Tensor,  # (N, L) match flags
    attention: torch.Tensor,  # (N, L)
    semantic: torch.Tensor | None = None,  # (N, L) semantic-match indices, or None (all NEUTRAL)
    context: torch.Tensor | None = None,  # (N, L, E) an encoder's contextual states, or None
    segments: torch.Tensor | None = None,  # (N, L) 1 + each token's segment (0: none), "segment" dropout
    word_of: torch.Tensor | None = None,  # (N, L) each token's word position (W at padding), or None
) -> torch.Tensor:  # (N, L, D); with word_of (N, W, D), ``attention`` then (N, W)
    drop = _drop_mask(parts, ids, flags)  # (N, L) bool, or None outside training
    if drop is not None and word_of is not None:
        drop = whole_words(drop, word_of)
    inputs = _embed_with_dropout(parts, ids, drop)
    if parts.heads.match is not None:
        inputs = inputs + parts.heads.match(flags).to(inputs.dtype)
    if parts.heads.semantic is not None and semantic is not None:
        inputs = inputs + parts.heads.semantic(semantic).to(inputs.dtype)
    if parts.heads.context is not None and context is not None:
        if drop is not None:
            # A dropped word loses its contextual state with its embedding: dropout stands for a word
            # the model cannot read, and its state alone would name it. Its neighbours' states name it
            # too; with ``segments`` its whole segment's states go ("segment" context dropout).
            context = context * (~_context_drop(drop, segments))[..., None].to(context.dtype)
        scale = parts.config.subwords.context_scale if parts.config.subwords is not None else 1.0
        inputs = inputs + scale * parts.heads.context(context.to(inputs.dtype))
    if word_of is not None:
        norm = parts.config.subwords is not None and parts.config.subwords.pooled_norm
        inputs = pool_by_word(inputs, word_of, attention.shape[1], norm=norm)
    if parts.config.subwords is not None:
        # The decoder body alone (its last state equals the full model's, bit for bit): scores never
        # read the LM head, whose 30,522 sub-word rows cost ~2 GFLOP per update, more than the layers.
        body = hf(parts.model).get_decoder()(inputs_embeds=inputs, attention_mask=attention)
        last: torch.Tensor = body.last_hidden_state
        return last
    output = parts.model(
        inputs_embeds=inputs, attention_mask=attention, output_hidden_states=True, logits_to_keep=1
    )
    hidden: torch.Tensor = output.hidden_states[-1]
    return hidden


def pool_by_word(
    inputs: torch.Tensor,  # (N, L, D) per token
    word_of: torch.Tensor,  # (N, L) each token's word in [0, W); W at padding (dropped)
    words: int,  # W
    *,
    norm: bool = False,  # the mean times sqrt(the word's token count)
) -> torch.Tensor:  # (N, W, D): each word the mean of its tokens' rows, zero where a row has no word
    n, _, d = inputs.shape
    sums = inputs.new_zeros(n, words + 1, d).scatter_add_(1, word_of[..., None].expand(-1, -1, d), inputs)
    counts = inputs.new_zeros(n, words + 1).scatter_add_(
        1, word_of, torch.ones_like(word_of, dtype=inputs.dtype)
    )
    counts = counts[:, :words, None].clamp(min=1)  # (N, W, 1)
    return sums[:, :words] / (counts.sqrt() if norm else counts)


def whole_words(drop: torch.Tensor, word_of: torch.Tensor) -> torch.Tensor:
    """(N, L) ``drop`` made word-wise: each token takes its word's first token's draw, so a pooled
    word is dropped whole (its first token's flag set the probability, as for a word-level model)."""
    first = _first_tokens(word_of)  # (N, L)
    words = int(word_of.max()) + 1
    dropped = torch.zeros(drop.shape[0], words, dtype=torch.long, device=drop.device)
    dropped.scatter_add_(1, word_of, (drop & first).long())  # (N, W + 1) one draw per word
    return dropped.gather(1, word_of) > 0


def _first_tokens(word_of: torch.Tensor) -> torch.Tensor:
    """(N, L) bool: whether each token (``word_of`` (N, L)) is its word's first."""
    first = torch.ones_like(word_of, dtype=torch.bool)
    first[:, 1:] = word_of[:, 1:] != word_of[:, :-1]
    return first


def first_piece_values(
    values: torch.Tensor,  # (N, L) one per token
    word_of: torch.Tensor,  # (N, L) each token's word in [0, W); W at padding
    words: int,  # W
) -> torch.Tensor:  # (N, W): each word's first token's value, 0 where a row has no such word
    spare = torch.full_like(word_of, words)  # where a word's later pieces go, then dropped
    slot = torch.where(_first_tokens(word_of), word_of, spare)  # (N, L)
    out = values.new_zeros(values.shape[0], words + 1)
    return out.scatter_(1, slot, values)[:, :words]


# The forward and the padding the scores use, for a loss that reads the same states
# (policy.distill, the warm start's distillation).
hidden_states = _hidden_states
pad_rows = _pad

# Prompts per forward pass when scoring many steps (the learner's batches). Steps are sorted by
# prompt length and forwarded in chunks of this size, each padded only to its own longest prompt:
# the same result as one padded forward with less wasted compute (prompt lengths vary ~2x).
LENGTH_BUCKET = 32


def score_steps(parts: ActingParts, encoded: Sequence[EncodedStep]) -> ScoredSteps:
    """Forward a batch of encoded prompts; gradients flow unless the caller disables them."""
    if len(encoded) <= LENGTH_BUCKET:
        return _score_padded(parts, encoded)
    order = sorted(range(len(encoded)), key=lambda i: encoded[i].positions)
    chunks = [
        _score_padded(parts, [encoded[i] for i in order[start : start + LENGTH_BUCKET]])
        for start in range(0, len(order), LENGTH_BUCKET)
    ]
    width = max(chunk.cand_mask.shape[1] for chunk in chunks)

    def cat(name: str, fill: float | bool) -> torch.Tensor:
        tensors = [getattr(chunk, name) for chunk in chunks]
        if tensors[0].dim() == 2:
            tensors = [torch.nn.functional.pad(t, (0, width - t.shape[1]), value=fill) for t in tensors]
        return torch.cat(tensors)[inverse]

    inverse = torch.empty(len(order), dtype=torch.long, device=parts.device)
    inverse[torch.tensor(order, device=parts.device)] = torch.arange(len(order), device=parts.device)
    return ScoredSteps(
        log_probs=cat("log_probs", float("-inf")),
        entropy=cat("entropy", 0.0),
        values=cat("values", 0.0),
        traj_logits=cat("traj_logits", 0.0),
        cand_mask=cat("cand_mask", False),
        span_lengths=cat("span_lengths", 0),
    )


def _semantic_rows(parts: ActingParts, encoded: Sequence[EncodedStep]) -> torch.Tensor | None:
    """(N, L) semantic-match indices, padded with NEUTRAL; None when the heads read none."""
    if parts.heads.semantic is None:
        return None
    if any(e.semantic is None for e in encoded):
        raise ValueError(
            "the policy reads the semantic match feature but a prompt was encoded without it: encode "
            "through Policy.encode (it adds the feature when SubwordSettings.semantic_match is set)"
        )
    return _pad([e.semantic or () for e in encoded], 0, parts.device)


def _word_rows(encoded: Sequence[EncodedStep], words: int, device: torch.device) -> torch.Tensor | None:
    """(N, L) each token's word position, ``words`` at padding; None when tokens are not pooled."""
    pooled = [e.word_of is not None for e in encoded]
    if not any(pooled):
        return None
    if not all(pooled):
        raise ValueError(
            "a batch mixes prompts with and without word pooling: encode them all through one Policy"
        )
    return _pad([e.word_of or () for e in encoded], words, device)


def _context_drop(drop: torch.Tensor, segments: torch.Tensor | None) -> torch.Tensor:
    """(N, L) tokens whose contextual states are dropped: the dropped tokens ``drop`` (N, L), and
    with ``segments`` (N, L; 1 + segment number, 0 outside any) every token of a segment that holds
    a dropped one."""
    if segments is None:
        return drop
    hits = torch.zeros(segments.shape[0], int(segments.max()) + 1, device=drop.device)  # (N, S + 1)
    hits.scatter_add_(1, segments, (drop & (segments > 0)).float())
    return drop | (hits.gather(1, segments) > 0)


def _segment_rows(parts: ActingParts, encoded: Sequence[EncodedStep]) -> torch.Tensor | None:
    """(N, L) 1 + each token's segment number (0 at separators and padding) when a dropped word
    takes its whole segment's states (``SubwordSettings.context_dropout`` "segment"), else None."""
    subwords = parts.config.subwords
    if parts.heads.context is None or subwords is None or subwords.context_dropout != "segment":
        return None
    rows = []
    for e in encoded:
        row = [0] * len(e.input_ids)
        for number, (first, end, _) in enumerate(e.segments, start=1):
            row[first:end] = [number] * (end - first)
        rows.append(row)
    return _pad(rows, 0, parts.device)


def _context_rows(parts: ActingParts, encoded: Sequence[EncodedStep]) -> torch.Tensor | None:
    """(N, L, E) contextual states of the prompts, zero at padding; None when the heads read none."""
    if parts.heads.context is None:
        return None
    if parts.context is None:
        raise ValueError(
            "the policy reads contextual states but was given no way to compute them: act and score "
            "through Policy.parts() (it supplies them when SubwordSettings.context_states is set)"
        )
    states = [parts.context(e) for e in encoded]  # each (L_i, E)
    return torch.nn.utils.rnn.pad_sequence(states, batch_first=True).to(parts.device)  # (N, L, E)


context_rows = _context_rows  # for policy.distill's prefix pass, as hidden_states


def _score_padded(parts: ActingParts, encoded: Sequence[EncodedStep]) -> ScoredSteps:
    device = parts.device
    ids = _pad([e.input_ids for e in encoded], parts.tokenizer.pad_token_id or 0, device)
    flags = _pad([e.flags for e in encoded], 0, device)
    lengths = torch.tensor([e.positions for e in encoded], device=device)
    attention = (torch.arange(int(lengths.max()), device=device)[None, :] < lengths[:, None]).long()
    word_of = _word_rows(encoded, int(lengths.max()), device)  # (N, L) or None
    semantic = _semantic_rows(parts, encoded)  # (N, L) or None
    context = _context_rows(parts, encoded)  # (N, L, E) or None
    segments = _segment_rows(parts, encoded) if parts.model.training else None  # (N, L) or None
    hidden = _hidden_states(
        parts, ids, flags, attention, semantic, context, segments, word_of
    ).float()  # (N, P, D)

    width = max(len(e.spans) for e in encoded)
    starts = torch.zeros(len(encoded), width, dtype=torch.long)
    ends = torch.ones(len(encoded), width, dtype=torch.long)
    for i, e in enumerate(encoded):
        if e.spans:
            spans = torch.tensor(e.spans, dtype=torch.long)
            starts[i, : len(spans)], ends[i, : len(spans)] = spans[:, 0], spans[:, 1]
    starts, ends = starts.to(device), ends.to(device)
    cand_mask = (
        torch.arange(width, device=device)[None, :]
        < torch.tensor([len(e.spans) for e in encoded], device=device)[:, None]
    )
    scores = parts.heads.candidate_scores(hidden, starts, ends)  # (N, K)
    if parts.heads.semantic_prior is not None and semantic is not None:
        # The index of a candidate's first position: its element's (NEUTRAL outside the elements).
        at = semantic if word_of is None else first_piece_values(semantic, word_of, hidden.shape[1])
        scores = scores + parts.heads.semantic_prior(at.gather(1, starts)).squeeze(-1)
    scores = scores / parts.config.temperature

    rows = torch.arange(len(encoded), device=device)
    critic_hidden = parts.heads.critic_states(ids, flags, attention, hidden, parts.config.critic, semantic)
    values = parts.heads.state_value(critic_hidden[rows, lengths - 1])
    instruction_end = torch.tensor([e.instruction_end for e in encoded], device=device)
    traj_logits = parts.heads.trajectory_logit(critic_hidden[rows, instruction_end])
    return ScoredSteps(
        log_probs=candidate_log_probs(scores, cand_mask),
        entropy=candidate_entropy(scores, cand_mask),
        values=values,
        traj_logits=traj_logits,
        cand_mask=cand_mask,
        span_lengths=(ends - starts) * cand_mask,
    )


@torch.no_grad()
def act_scoring(
    parts: ActingParts, observations: Sequence[Observation], *, greedy: bool, generator: torch.Generator
) -> list[ActOutput]:
    encoded = [parts.encode(o.instruction, o.ui_text, o.previous_actions) for o in observations]
    return sample_actions([e.candidates for e in encoded], score_steps(parts, encoded), greedy, generator)


def sample_actions(
    candidates: Sequence[Sequence[Any]], scored: ScoredSteps, greedy: bool, generator: torch.Generator
) -> list[ActOutput]:
    """One action per step from its candidates' scores: the most likely (`greedy`) or a sample."""
    log_probs = scored.log_probs.cpu()  # (B, K)
    if greedy:
        choices = log_probs.argmax(dim=-1)
    else:
        choices = torch.multinomial(log_probs.exp(), 1, generator=generator).squeeze(-1)
    outputs = []
    for i, step_candidates in enumerate(candidates):
        k = int(choices[i])
        candidate = step_candidates[k]
        outputs.append(
            ActOutput(
                raw_text=candidate.action_text,
                action=candidate.action,
                logprob=float(log_probs[i, k]),
                token_count=int(scored.span_lengths[i, k]),
                entropy=float(scored.entropy[i]),
                value=float(scored.values[i]),
                extras={"candidates": len(step_candidates), "choice": k, "candidate_text": candidate.text},
            )
        )
    return outputs


def evaluate_scoring(parts: ActingParts, steps: Sequence[StepInput]) -> dict[str, torch.Tensor]:
    """Flat (N,) log π of each stored action, entropy, V(s), trajectory logit and ``known``."""
    encoded = [parts.encode(s.instruction, s.observation_text, s.history) for s in steps]
    scored = score_steps(parts, encoded)
    choice = [e.index_of(s.action, parts.config.screen_size) for e, s in zip(encoded, steps, strict=True)]
    known = torch.tensor([c is not None for c in choice], device=parts.device)
    index = torch.tensor([c or 0 for c in choice], device=parts.device)
    chosen = scored.log_probs.gather(1, index[:, None]).squeeze(1)
    logp = torch.where(known, chosen, torch.full_like(chosen, float("-inf")))
    return {
        "logp": logp,
        "entropy": scored.entropy,
        "values": scored.values,
        "traj_logits": scored.traj_logits,
        "known": known,
    }
