"""Distilling a frozen sentence encoder's instruction geometry into the tiny model (a warm-start
auxiliary loss, ``WarmStartConfig.distill_weight``).

The sub-word table (``policy.subwords``) gives the tiny model MiniLM's word meanings; this gives it
MiniLM's sentence meanings too: during the warm start, the tiny model's pooled instruction state,
through a learned linear map, is pulled towards MiniLM's frozen sentence embedding of the same
instruction (cosine distance), so that two phrasings MiniLM finds alike start RL close together.
Only the warm start pays for it: MiniLM runs once per distinct instruction (cached), the tiny model
once more over each instruction's prompt prefix, and the map is dropped afterwards.

Pure tensor math (:func:`mean_pool`, :func:`distill_loss`) is apart from the encoder's I/O
(:class:`SentenceTargets`), whose cache is keyed by the encoder folder's content hash (a changed
encoder empties it) and holds at most ``max_entries`` texts.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from distrl_core.policy.backbone import hash_checkpoint_files, resolve_checkpoint_dir
from distrl_core.policy.parts import ActingParts
from distrl_core.policy.prompt import EncodedStep
from distrl_core.policy.scoring import context_rows, hidden_states, pad_rows

__all__ = ["SentenceTargets", "distill_loss", "instruction_states", "mean_pool"]


def mean_pool(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, T, E) states averaged over the positions where ``mask`` (B, T) is true: (B, E)."""
    weights = mask.to(states.dtype)[..., None]  # (B, T, 1)
    return (states * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1.0)


def distill_loss(student: torch.Tensor, projection: nn.Module, target: torch.Tensor) -> torch.Tensor:
    """Mean cosine distance between ``projection(student)`` (B, D) -> (B, E) and ``target`` (B, E):
    the direction of a sentence embedding carries its meaning (sentence-transformers compare by
    cosine), its length does not."""
    mapped = projection(student)  # (B, E)
    cosine = nn.functional.cosine_similarity(mapped, target.to(mapped.dtype), dim=-1)  # (B,)
    return (1.0 - cosine).mean()


def instruction_states(parts: ActingParts, encoded: Sequence[EncodedStep]) -> torch.Tensor:
    """The tiny model's final states averaged over each prompt's instruction tokens: (B, D).

    The model is causal and the instruction opens the prompt, so its states depend on the tokens
    up to ``instruction_end`` alone: the prefix is forwarded by itself, with the step's own match
    flags, and gives the states the whole prompt would."""
    if any(e.word_of is not None for e in encoded):
        raise ValueError(
            "distillation reads the instruction's word pieces, and this policy pools them into words "
            "(SubwordSettings.pool_words): set the warm start's distill_weight to 0, or use base tiny-minilm"
        )
    prefixes = [e.input_ids[: e.instruction_end + 1] for e in encoded]
    flags = pad_rows([e.flags[: e.instruction_end + 1] for e in encoded], 0, parts.device)  # (B, T)
    ids = pad_rows(prefixes, parts.tokenizer.pad_token_id or 0, parts.device)  # (B, T)
    lengths = torch.tensor([len(p) for p in prefixes], device=parts.device)  # (B,)
    attention = torch.arange(ids.shape[1], device=parts.device)[None, :] < lengths[:, None]  # (B, T)
    context = context_rows(parts, encoded)  # (B, L, E) of the whole prompts, or None
    if context is not None:  # a segment's states are its text's alone: the prefix's are the whole's
        context = context[:, : ids.shape[1]]  # (B, T, E)
    states = hidden_states(parts, ids, flags, attention.long(), None, context).float()  # (B, T, D)
    return mean_pool(states, attention)


class SentenceTargets:
    """Sentence embeddings (mean-pooled last layer, L2-normalised: all-MiniLM-L6-v2's own recipe) of
    texts under the frozen encoder at ``source``, least recently used evicted beyond ``max_entries``.
    Every call checks the folder's content hash (cached by file stamps: a stat per file), and a
    changed encoder is loaded again with an empty cache: no value outlives its base."""

    def __init__(self, source: str, max_entries: int = 4096) -> None:
        if max_entries < 1:
            raise ValueError(f"SentenceTargets.max_entries must be >= 1, got {max_entries}")
        self.folder = resolve_checkpoint_dir(source).resolve()
        self.max_entries = max_entries
        self.identity = ""
        self._encoder: Any = None
        self._tokenizer: Any = None
        self._entries: OrderedDict[str, torch.Tensor] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def _current(self) -> None:
        identity = hash_checkpoint_files(self.folder)
        if identity == self.identity:
            return
        from transformers import AutoModel, AutoTokenizer

        self._tokenizer = AutoTokenizer.from_pretrained(str(self.folder))
        self._encoder = AutoModel.from_pretrained(str(self.folder)).eval()
        self._entries.clear()
        self.identity = identity

    @torch.no_grad()
    def compute(self, texts: Sequence[str]) -> torch.Tensor:
        """(B, E) embeddings computed now, never from the cache."""
        self._current()
        batch = self._tokenizer(list(texts), padding=True, truncation=True, return_tensors="pt")
        states = self._encoder(**batch).last_hidden_state  # (B, T, E)
        pooled = mean_pool(states, batch["attention_mask"].bool())  # (B, E)
        return nn.functional.normalize(pooled, dim=-1)

    def __call__(self, texts: Sequence[str]) -> torch.Tensor:
        """(B, E) embeddings of ``texts``, from the cache where it holds them."""
        with self._lock:
            self._current()
            missing = list(dict.fromkeys(t for t in texts if t not in self._entries))
            if missing:
                for text, row in zip(missing, self.compute(missing), strict=True):
                    self._entries[text] = row
            rows = []
            for text in texts:
                self._entries.move_to_end(text)
                rows.append(self._entries[text])
            result = torch.stack(rows)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
            return result
