"""A frozen encoder's contextual token states as an input of the tiny model (base "tiny-minilm-ctx",
``SubwordSettings.context_states``).

The sub-word table gives each word piece MiniLM's static meaning, which does not ground a phrase
training never tied to an app ("bring up the gallery of pictures" for Photos): a word's static
vector knows little of the phrase it sits in. MiniLM's trunk does: its last-layer state of a token
is that token read in its sentence. Running the trunk in every update would cost ~100x the tiny
model's work, but its states depend only on the text it reads, and a prompt is a few dozen short
segments ("task : <instruction>", one per screen element, ...) that repeat from screen to screen.
So the trunk reads each segment's text alone, once per process (:class:`ContextCache`), and the
prompt's states are those of its segments laid side by side (:func:`assemble_states`); the tiny
model adds a trained linear map of them to its input embeddings (``PolicyHeads.context``,
zero-initialised, so a fresh policy scores exactly as "tiny-minilm" does).

Alignment: a segment's state rows are used only where the segment's own token ids equal the prompt's
ids over the segment's place in it (WordPiece splits at whitespace and punctuation, so the " | "
separators never merge with a neighbour and the two agree; the check makes any tokenizer that
disagrees fall back to the static embedding alone, never to misplaced rows). Separators and a
segment longer than the trunk's positions get no states either (zero rows).

The cache is keyed by (the encoder folder's content hash, text): a changed encoder hashes
differently and misses, and its old entries are dropped when the encoder is loaded again. Entries
are float32: float16 rounds MiniLM's states (|x| up to ~2.8 on SimDroid's segments) by up to
~8e-4, far beyond the 1e-5 that re-scoring a stored step must agree to. It is bounded by bytes, least recently used
evicted first.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from distrl_core.policy.backbone import FrozenEncoders, resolve_checkpoint_dir

__all__ = [
    "CACHE_BYTES",
    "ContextCache",
    "assemble_states",
    "context_cache",
    "encoder_width",
    "prompt_states",
]

# Bytes of states kept per process. A segment of ~6 tokens holds 6 x 384 x 4 = ~9 KB; a General
# run's screens and instructions have a few thousand distinct segments (~30 MB), so a run never
# evicts in practice, and a long-lived collector stays within this bound.
CACHE_BYTES = 256 << 20

Entry = tuple[tuple[int, ...], torch.Tensor]  # a segment's token ids (n,) and its states (n, E)
Placed = tuple[int, int, tuple[int, ...], torch.Tensor]  # (first, end) in the prompt, then an Entry


def assemble_states(
    length: int,  # L, the prompt's tokens
    width: int,  # E, the encoder's state width
    prompt_ids: Sequence[int],  # (L,)
    segments: Sequence[Placed],  # (first, end, ids (n,), states (n, E)) of each segment
) -> tuple[torch.Tensor, int]:  # ((L, E), tokens left without states by a misalignment)
    """The prompt's (L, E) context states: each segment's rows placed over [first, end) when its
    own ids equal the prompt's there, zero rows elsewhere (separators, misaligned segments)."""
    out = torch.zeros(length, width)  # (L, E)
    unaligned = 0
    for first, end, ids, states in segments:
        if tuple(prompt_ids[first:end]) == ids and states.shape == (end - first, width):
            out[first:end] = states
        else:
            unaligned += end - first
    return out, unaligned


def encoder_width(source: str) -> int:
    """The encoder's state width E, read from its config.json (no weights loaded)."""
    config = resolve_checkpoint_dir(source) / "config.json"
    if not config.is_file():
        raise FileNotFoundError(
            f"{config} is missing: SubwordSettings.source must be a Hugging Face encoder folder to read "
            "contextual states from (e.g. .distrl/models/all-minilm-l6-v2)"
        )
    width: int = json.loads(config.read_text())["hidden_size"]
    return width


class ContextCache:
    """Per-segment contextual states of texts under frozen encoders, least recently used evicted
    beyond ``max_bytes`` (all encoders together). One lock guards the entries and the loaded
    encoders, so a learner and its in-process collectors (threads) share one copy; each process
    (a collector elsewhere) keeps its own."""

    def __init__(self, max_bytes: int = CACHE_BYTES) -> None:
        if max_bytes < 1:
            raise ValueError(f"ContextCache.max_bytes must be >= 1, got {max_bytes}")
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[tuple[str, str], Entry] = OrderedDict()
        self._encoders = FrozenEncoders()  # the trunks, by folder
        self._lock = threading.Lock()
        self.computed = 0  # texts run through a trunk (the misses), for tests and benches
        self.unaligned = 0  # prompt tokens left without states by a misalignment, for the same

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._encoders.clear()
            self.bytes = 0

    def _encoder(self, folder: Path) -> tuple[str, Any, Any]:
        loaded, replaced = self._encoders.get(folder)
        if replaced is not None:  # the folder changed: its old states can never be read again
            for key in [k for k in self._entries if k[0] == replaced]:
                self._drop(key)
        return loaded

    def _drop(self, key: tuple[str, str]) -> None:
        _, states = self._entries.pop(key)
        self.bytes -= states.numel() * states.element_size()

    @torch.no_grad()
    def _run(self, tokenizer: Any, trunk: Any, text: str) -> Entry:
        # One text per pass, never padded beside others: padding changes the matmul shapes and so
        # the last bits of a state, and a segment's states must not depend on its company (the
        # collector and the learner re-scoring its step meet it in different batches).
        batch = tokenizer([text], return_tensors="pt")
        ids = tuple(int(i) for i in batch["input_ids"][0, 1:-1])  # without [CLS] and [SEP]
        limit = getattr(trunk.config, "max_position_embeddings", 512)
        if len(ids) + 2 > limit:  # the trunk cannot read it whole: the static embedding alone
            return ids, torch.zeros(0, trunk.config.hidden_size)
        states = trunk(**batch).last_hidden_state[0, 1:-1].float()  # (n, E)
        return ids, states.contiguous()

    def compute(self, source: str, text: str) -> Entry:
        """A segment's ids and states computed now, never from the cache."""
        with self._lock:
            _, tokenizer, trunk = self._encoder(resolve_checkpoint_dir(source).resolve())
            return self._run(tokenizer, trunk, text)

    def states(self, source: str, texts: Sequence[str]) -> tuple[int, list[Entry]]:
        """The encoder's width E and each text's (ids, states), from the cache where it holds them
        (the trunk reads each missing distinct text once)."""
        with self._lock:
            identity, tokenizer, trunk = self._encoder(resolve_checkpoint_dir(source).resolve())
            out = []
            for text in texts:
                key = (identity, text)
                entry = self._entries.get(key)
                if entry is None:
                    entry = self._run(tokenizer, trunk, text)
                    self.computed += 1
                    self._entries[key] = entry
                    self.bytes += entry[1].numel() * entry[1].element_size()
                else:
                    self._entries.move_to_end(key)
                out.append(entry)
            # Evicted after the lookups: this call's own entries are returned whatever the bound.
            while self.bytes > self.max_bytes and self._entries:
                self._drop(next(iter(self._entries)))
            return int(trunk.config.hidden_size), out

    def count_unaligned(self, tokens: int) -> None:
        with self._lock:
            self.unaligned += tokens


_CACHE = ContextCache()


def context_cache() -> ContextCache:
    """The process's cache."""
    return _CACHE


def prompt_states(
    source: str,
    prompt_ids: Sequence[int],  # (L,)
    segments: Sequence[tuple[int, int, str]],  # (first, end, text) of each segment
    cache: ContextCache | None = None,
) -> torch.Tensor:  # (L, E)
    """The context states of one prompt whose segments are ``segments`` (``EncodedStep.segments``)."""
    cache = context_cache() if cache is None else cache
    width, entries = cache.states(source, [text for _, _, text in segments])
    placed = [
        (first, end, ids, states) for (first, end, _), (ids, states) in zip(segments, entries, strict=True)
    ]
    out, unaligned = assemble_states(len(prompt_ids), width, prompt_ids, placed)
    if unaligned:
        cache.count_unaligned(unaligned)
    return out
