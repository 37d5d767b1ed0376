"""A semantic match feature from a frozen sentence encoder (``SubwordSettings.semantic_match``, base
"tiny-minilm-sem").

The exact-match flags (``tokenizer.match_flags``) tell the tiny model which screen words also occur
in the instruction; they say nothing when the instruction names its target with other words ("bring
up the gallery of pictures" for the Photos icon, "kill the wifi" for "Network & internet"). The
frozen encoder the sub-words come from (all-MiniLM-L6-v2) knows those paraphrases: it ranks the
right launcher app first for 16 of the 17 app phrasings of the free-phrasing development set. This
hands that knowledge to the tiny model as one more input feature, computed per distinct text once:

- each screen element's label and the instruction are embedded by the frozen encoder (mean of its
  last hidden states over the attention mask, L2-normalised: all-MiniLM-L6-v2 was trained, as a
  sentence-transformers model, with exactly that pooling on a cosine-similarity contrastive
  objective, so the cosine of two such vectors is the similarity it learned; its [CLS] state was
  never trained to summarise the text);
- the element's cosine similarity to the instruction becomes one index per token of that element's
  segment in the prompt (:func:`semantic_indices`): its similarity bin, and whether it is the most
  similar element of the screen; every other token (the instruction, history, keys, swipes,
  ``status``) gets :data:`NEUTRAL`;
- the policy adds an embedding of that index to its input embeddings, as it adds the match flags'
  (``heads.PolicyHeads.semantic``; NEUTRAL's row is zero and never trained, so tokens outside the
  elements read exactly what they read without the feature).

Why bins and an embedding rather than a learned vector scaled by the similarity: the cosines of one
encoder sit in a narrow, instruction-dependent range (unrelated short texts ~0.0-0.2, paraphrases
~0.3-0.7), and what matters is rarely linear in them; an embedding per bin learns any mapping
(including "below 0.2 means nothing"), the "most similar on screen" bit carries the ranking the
probe measured (an absolute cosine of 0.35 may be the best or the fifth best), and it is the same
mechanism as the match flags, whose scale the tiny model was tuned with.

The tensor math is pure (:func:`cosine_similarities`, :func:`similarity_indices`,
:func:`semantic_indices`). The encoder and its embeddings live in a process-level cache
(:class:`EmbeddingCache`): keyed by (the encoder folder's content hash, text), bounded, thread-safe,
the encoder loaded once per process and again only when its folder changes.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from distrl_core.policy.backbone import FrozenEncoders, resolve_checkpoint_dir
from distrl_core.policy.candidates import instruction_spans

__all__ = [
    "BINS",
    "BIN_EDGES",
    "CACHE_ENTRIES",
    "INDICES",
    "LISTED_LABELS_MIN",
    "NEUTRAL",
    "EmbeddingCache",
    "cosine_similarities",
    "embedding_cache",
    "instruction_without_values",
    "path_similarities",
    "scoped_indices",
    "semantic_indices",
    "similarity_bins",
    "similarity_indices",
    "step_semantic",
    "value_similarities",
]

# Bin edges of the cosine similarity: < 0.1, [0.1, 0.2), ..., [0.6, 0.7), >= 0.7 (8 bins).
BIN_EDGES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
BINS = len(BIN_EDGES) + 1
NEUTRAL = 0  # a token outside any element (and padding): the embedding's zero, untrained row
# Index of an element's token: 1 + its bin, plus BINS when it is the most similar element on screen.
INDICES = 1 + 2 * BINS
# With a scope (``SubwordSettings.semantic_labels``), a screen is scored only when it shows at least
# this many of its labels: a launcher page or an app list. An app's own screens show its name (the
# Clock app's title and tab read "Clock"), and marking that as what an alarm instruction means
# would send the policy to it instead of "Add alarm", the failure the unscoped feature had.
LISTED_LABELS_MIN = 3
# Texts kept per process: 65,536 x 384 float32 (all-MiniLM-L6-v2's width) = ~100 MB at most. The
# launcher, settings and shop screens show a few hundred distinct labels and a run sees a few
# thousand distinct instructions, so a run never evicts in practice; the bound keeps a long-lived
# process (a collector over many runs) from growing without end.
CACHE_ENTRIES = 1 << 16


def cosine_similarities(query: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of ``query`` (E,) to each of ``rows`` (K, E): (K,). Normalises both, so
    unnormalised embeddings are fine; a zero row has similarity 0."""
    unit_query = torch.nn.functional.normalize(query.double(), dim=-1)  # (E,)
    unit_rows = torch.nn.functional.normalize(rows.double(), dim=-1)  # (K, E)
    return (unit_rows @ unit_query).float()  # (K,)


def similarity_bins(similarities: torch.Tensor) -> torch.Tensor:
    """The bin of each similarity (K,): (K,) long in [0, BINS), cut at ``BIN_EDGES``."""
    edges = torch.tensor(BIN_EDGES, dtype=similarities.dtype)  # (BINS - 1,)
    return torch.bucketize(similarities, edges, right=True)  # (K,)


def similarity_indices(similarities: torch.Tensor) -> torch.Tensor:
    """Feature index of each element from its similarity (K,): (K,) long in [1, INDICES).

    1 + the bin of the similarity (``BIN_EDGES``), plus ``BINS`` for the elements whose similarity
    is the screen's largest (ties all count)."""
    if similarities.numel() == 0:
        return torch.zeros(0, dtype=torch.long)
    best = similarities == similarities.max()  # (K,)
    return 1 + similarity_bins(similarities) + BINS * best.long()


def scoped_indices(
    element_labels: Sequence[str],
    scope: Sequence[Sequence[str]],
    similarities: torch.Tensor,
    margin: float = 0.0,
) -> torch.Tensor:
    """Feature index of each element (K,) when only the labels along ``scope``'s paths are scored.

    A path is an app's name followed by the labels tapped on the way to one of its controls
    (("Settings", "Network & internet", "Wi-Fi")); an app alone is a path of one. ``similarities``
    (P,) are each path's last label's to the instruction. A label's similarity is its best path's
    through it (the Settings icon is as like "kill the wifi" as "Wi-Fi" is), so an element labelled
    as one gets 1 + that bin; the most similar path of all (on the screen or not; ties all count)
    marks, plus ``BINS``, the deepest of its labels the screen shows: the Settings icon on a
    launcher, "Network & internet" on Settings' list, "Wi-Fi" on that page (not the page's own
    title above it). Every other element is NEUTRAL, and so is an app name on a screen showing fewer
    than ``LISTED_LABELS_MIN`` distinct app names. With a ``margin``, nothing is marked unless the
    most similar path leads the second by at least that much: a near tie (a switch instruction,
    about as like "Phone" as "Settings") says nothing about where to go."""
    paths = [tuple(label.casefold() for label in path) for path in scope]
    shown = {label.casefold() for label in element_labels}
    launcher = len({path[0] for path in paths} & shown) >= LISTED_LABELS_MIN
    node_depth: dict[str, int] = {}
    node_best: dict[str, torch.Tensor] = {}
    for path, similarity in zip(paths, similarities, strict=True):
        for depth, label in enumerate(path):
            node_depth[label] = min(depth, node_depth.get(label, depth))
            held = node_best.get(label)
            node_best[label] = similarity if held is None else torch.maximum(held, similarity)
    visible = {label for label in shown & node_depth.keys() if node_depth[label] > 0 or launcher}
    if not visible:
        return torch.full((len(element_labels),), NEUTRAL, dtype=torch.long)
    nodes = sorted(visible)
    bins = similarity_bins(torch.stack([node_best[label] for label in nodes]))  # (N,)
    index_of = {label: 1 + int(b) for label, b in zip(nodes, bins, strict=True)}
    top = similarities.topk(min(2, len(paths))).values  # (2,) or (1,)
    marked = set()
    if margin <= 0 or len(top) < 2 or float(top[0] - top[1]) >= margin:
        for path, best in zip(paths, (similarities == similarities.max()).tolist(), strict=True):
            on_screen = [label for label in path if label in visible]  # in path order: deepest last
            if best and on_screen:
                marked.add(on_screen[-1])
    for label in marked:
        index_of[label] += BINS
    return torch.tensor(
        [index_of.get(label.casefold(), NEUTRAL) for label in element_labels], dtype=torch.long
    )


# The instruction's spans that are a value to put into a control rather than words about which one:
# ``candidates.instruction_spans``'s quoted text, web addresses and search queries (times are left:
# an alarm's route ends at a button, not at the field the time is typed into).
VALUE_SPAN_KINDS = frozenset({"text", "address", "query"})


def instruction_without_values(instruction: str) -> str:
    """The instruction less the values it would type (``VALUE_SPAN_KINDS``), whitespace collapsed:
    "google best ramen in tokyo" -> "google". The instruction itself where nothing is left."""
    out = instruction
    spans = sorted(
        (text for kind, text in instruction_spans(instruction) if kind in VALUE_SPAN_KINDS), key=len
    )
    for span in reversed(spans):  # the longest first: a shorter span may lie inside it
        quoted = rf"(?:\"{re.escape(span)}\"|'{re.escape(span)}')"
        out = re.sub(quoted, " ", out, flags=re.IGNORECASE)
        out = re.sub(re.escape(span), " ", out, flags=re.IGNORECASE)
    return " ".join(out.split()) or instruction


def value_similarities(full: torch.Tensor, without: torch.Tensor, values: Sequence[bool]) -> torch.Tensor:
    """Each path's similarity (P,): ``without`` (P,), the instruction's less its values, for the
    paths flagged in ``values`` (P booleans: a route to a control that takes a value), ``full``
    (P,) for the rest."""
    return torch.where(torch.tensor(list(values), dtype=torch.bool), without, full)


def semantic_indices(length: int, spans: Sequence[tuple[int, int]], indices: torch.Tensor) -> tuple[int, ...]:
    """One index per token of a ``length``-token prompt: ``indices[k]`` (K,) on the tokens
    [first, end) of element ``k``'s span (``spans``, K of them), NEUTRAL elsewhere."""
    out = torch.full((length,), NEUTRAL, dtype=torch.long)  # (L,)
    for (first, end), index in zip(spans, indices.tolist(), strict=True):
        out[first:end] = index
    return tuple(out.tolist())


def _mean_pooled(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, T, E) states averaged over the positions where ``mask`` (B, T) is 1, normalised: (B, E)."""
    weights = mask.to(states.dtype)[..., None]  # (B, T, 1)
    pooled = (states * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1.0)  # (B, E)
    return torch.nn.functional.normalize(pooled, dim=-1)


class EmbeddingCache:
    """Sentence embeddings of texts under frozen encoders, least recently used evicted beyond
    ``max_entries`` (texts of all encoders together). Entries are keyed by (the folder's content
    hash, text): a folder whose files change hashes differently, is loaded again, and never gets an
    entry computed from its old weights. One lock guards the entries and the encoders, so threads
    (a learner's and its in-process collectors') share one copy of each."""

    def __init__(self, max_entries: int = CACHE_ENTRIES) -> None:
        if max_entries < 1:
            raise ValueError(f"EmbeddingCache.max_entries must be >= 1, got {max_entries}")
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[str, str], torch.Tensor] = OrderedDict()
        self._encoders = FrozenEncoders()  # the encoders, by folder
        self._lock = threading.Lock()
        self.computed = 0  # texts ``embed`` ran through an encoder (its misses), for tests and benches

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._encoders.clear()

    def _encoder(self, folder: Path) -> tuple[str, Any, Any]:
        return self._encoders.get(folder)[0]

    @torch.no_grad()
    def compute(self, source: str, texts: Sequence[str]) -> torch.Tensor:
        """(B, E) embeddings of ``texts`` computed now, never from the cache (float32, CPU)."""
        with self._lock:
            _, tokenizer, model = self._encoder(resolve_checkpoint_dir(source).resolve())
            return self._run(tokenizer, model, texts)

    def _run(self, tokenizer: Any, model: Any, texts: Sequence[str]) -> torch.Tensor:
        # One text per pass, never padded beside longer ones: padding changes the matmul shapes and
        # so the last bits of a vector, and a text's vector must not depend on what it was batched
        # with (a collector and the learner re-scoring its steps meet the same label in different
        # company, and a bin edge must cut both alike). A label costs ~2 ms once per process.
        rows = []
        for text in texts:
            batch = tokenizer([text], truncation=True, return_tensors="pt")
            with torch.no_grad():
                states = model(**batch).last_hidden_state  # (1, T, E)
            rows.append(_mean_pooled(states.float(), batch["attention_mask"]))  # (1, E)
        return torch.cat(rows)  # (B, E)

    def embed(self, source: str, texts: Sequence[str]) -> torch.Tensor:
        """(B, E) embeddings of ``texts`` under the encoder at ``source``, from the cache where it
        holds them (one encoder pass over the distinct missing texts)."""
        with self._lock:
            identity, tokenizer, model = self._encoder(resolve_checkpoint_dir(source).resolve())
            keys = [(identity, text) for text in texts]
            missing = list(dict.fromkeys(key for key in keys if key not in self._entries))
            if missing:
                rows = self._run(tokenizer, model, [text for _, text in missing])
                self.computed += len(missing)
                for key, row in zip(missing, rows, strict=True):
                    self._entries[key] = row
            result = []
            for key in keys:
                self._entries.move_to_end(key)
                result.append(self._entries[key])
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
            return torch.stack(result) if result else torch.zeros(0, 0)


_CACHE = EmbeddingCache()


def embedding_cache() -> EmbeddingCache:
    """The process's cache (one per process: collectors in their own processes load their own)."""
    return _CACHE


def path_similarities(
    source: str, instruction: str, scope: Sequence[Sequence[str]], values: Sequence[bool] = ()
) -> torch.Tensor:
    """(P,) each path's last label's cosine similarity to the instruction under the encoder at
    ``source``; for the paths ``values`` flags, to :func:`instruction_without_values`."""
    leaves = [path[-1] for path in scope]
    vectors = embedding_cache().embed(source, [instruction, *leaves])  # (1 + P, E)
    similarities = cosine_similarities(vectors[0], vectors[1:])  # (P,)
    if any(values):
        without = embedding_cache().embed(source, [instruction_without_values(instruction)])[0]  # (E,)
        similarities = value_similarities(similarities, cosine_similarities(without, vectors[1:]), values)
    return similarities


def step_semantic(
    source: str,
    instruction: str,
    elements: Sequence[tuple[int, int, str]],
    length: int,
    scope: Sequence[Sequence[str]] = (),
    margin: float = 0.0,
    values: Sequence[bool] = (),
) -> tuple[int, ...]:
    """The semantic indices (one per token, ``length`` of them) of a prompt whose screen elements are
    ``elements`` ((first, end, label), ``EncodedStep.elements``), under the encoder at ``source``.
    With a ``scope`` (paths: ``SubwordSettings.semantic_scope``) only the elements labelled along
    them are scored (:func:`scoped_indices`), and "most similar" is among the whole scope, marked
    only with a lead of ``margin`` (``SubwordSettings.semantic_margin``). ``values`` (one per path,
    or empty: none) flags the routes to controls that take a value (``SubwordSettings.
    semantic_value_paths``), whose last label is compared with :func:`instruction_without_values`:
    what is to be typed says nothing about where to type it ("google best ramen in tokyo" is about
    as like Translate as like Chrome's address bar; "google" is like the bar)."""
    if not elements:
        return (NEUTRAL,) * length
    labels = [label for _, _, label in elements]
    spans = [(first, end) for first, end, _ in elements]
    if scope:
        similarities = path_similarities(source, instruction, scope, values)  # (P,)
        return semantic_indices(length, spans, scoped_indices(labels, scope, similarities, margin))
    vectors = embedding_cache().embed(source, [instruction, *labels])  # (1 + K, E)
    similarities = cosine_similarities(vectors[0], vectors[1:])  # (K,)
    return semantic_indices(length, spans, similarity_indices(similarities))
