"""The tiny default on a pretrained encoder's sub-words (``PolicyConfig.subwords``, base "tiny-minilm").

The tiny model's word vocabulary turns every word its corpus lacks into [UNK], and the pretrained
encoder that knows such words is too expensive to update on two cores. This puts the encoder's
word-level knowledge inside the tiny model instead: its tokenizer is the encoder's WordPiece one
(an unseen word splits into known sub-words), and its embedding table is the encoder's word-piece
embeddings projected onto their top ``hidden_size`` principal axes (PCA, computed once from the
embedding matrix), so those sub-words arrive with their pretrained meaning. Only the embedding
lookup changes: the layers, heads and an update's cost are the tiny model's.

The projection is pure tensor math (:func:`principal_projection`, :func:`scaled_to_std`); reading
the encoder's files is apart (:func:`read_word_embeddings`). The projected table is cached per
process, keyed by the encoder folder's content hash (``backbone.hash_checkpoint_files``: names,
sizes and mtimes of its files, rehashed on any change), so a table never outlives a change of its
base, and the cache holds at most ``TABLE_CACHE_ENTRIES`` tables (7.8 MB each at 30,522 x 64).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from distrl_core.policy.backbone import build_tiny_model, hash_checkpoint_files, hf, resolve_checkpoint_dir
from distrl_core.policy.config import PolicyConfig, SubwordSettings

__all__ = [
    "EMBEDDING_KEY",
    "TABLE_CACHE_ENTRIES",
    "build_tiny_base",
    "freeze_subword_table",
    "load_subword_tokenizer",
    "principal_projection",
    "read_word_embeddings",
    "scaled_to_std",
    "subword_table",
    "tiny_base_salt",
]

EMBEDDING_KEY = "embeddings.word_embeddings.weight"  # BERT-style word-piece embeddings (V, E)
WEIGHTS_FILE = "model.safetensors"
# Tables kept per process: a learner and its collectors use one; a few leave room for a test or a
# bench building several widths or bases (each ~V x width x 4 bytes).
TABLE_CACHE_ENTRIES = 4


def principal_projection(matrix: torch.Tensor, components: int) -> torch.Tensor:
    """The rows of ``matrix`` (V, E) on its top ``components`` principal axes: (V, components).

    Centred on the mean row; the axes are the eigenvectors of the (E, E) covariance with the largest
    eigenvalues, in decreasing order. An eigenvector is defined up to its sign, so each axis is
    flipped to make its largest-magnitude coordinate positive: the table is then a function of the
    matrix alone. Computed in float64 (the covariance sums V ~ 30,000 outer products), on one
    thread: a multi-threaded matmul sums in another order, and a table that differs in its last bits
    hashes differently, so a version trained in a one-thread demo would not load in a command run
    with the machine's default threads (``tiny_base_salt``'s check)."""
    rows, width = matrix.shape
    if not 1 <= components <= width:
        raise ValueError(
            f"a projection to {components} components needs 1 <= components <= the matrix's width ({width}): "
            "lower TinyModelConfig.hidden_size to at most the encoder's embedding width"
        )
    if rows < 2:
        raise ValueError(f"a principal projection needs at least 2 rows, got {rows}")
    with _one_thread():
        data = matrix.to(torch.float64)
        centred = data - data.mean(dim=0, keepdim=True)  # (V, E)
        covariance = centred.T @ centred / (rows - 1)  # (E, E)
        _, vectors = torch.linalg.eigh(covariance)  # eigenvalues ascending; vectors (E, E), one per column
        axes = vectors[:, -components:].flip(-1)  # (E, k), largest eigenvalue first
        largest = axes.abs().argmax(dim=0)  # (k,) where each axis is largest in magnitude
        signs = torch.sign(axes[largest, torch.arange(components)])  # (k,)
        projected: torch.Tensor = centred @ (axes * signs)  # (V, k)
    return projected


_threads_lock = threading.RLock()  # re-entered: _cached_table pins the projection and the scaling


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Torch on one intra-op thread for the block (the setting is the process's: other threads'
    ops run on one thread meanwhile too, for the ~1 s a table takes once per process)."""
    with _threads_lock:
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(before)


def scaled_to_std(table: torch.Tensor, std: float) -> torch.Tensor:
    """``table`` times one factor that makes the standard deviation of all its entries ``std``."""
    spread = float(table.std())
    if not spread > 0:
        raise ValueError("the projected embedding table is constant: the encoder's embeddings hold no signal")
    return table * (std / spread)


def read_word_embeddings(folder: Path) -> torch.Tensor:
    """The encoder's word-piece embedding matrix (V, E), read alone from its safetensors file."""
    from safetensors import safe_open

    path = Path(folder) / WEIGHTS_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: SubwordSettings.source must be a Hugging Face encoder folder with its weights "
            "in model.safetensors (e.g. the one `distrl pretrained` prepares)"
        )
    with safe_open(str(path), "pt") as weights:
        names = set(weights.keys())
        key = next((k for k in (EMBEDDING_KEY, f"bert.{EMBEDDING_KEY}") if k in names), None)
        if key is None:
            raise KeyError(f"{path} holds no {EMBEDDING_KEY}: not a BERT-style encoder's weights")
        matrix: torch.Tensor = weights.get_tensor(key)
    return matrix


@functools.lru_cache(maxsize=TABLE_CACHE_ENTRIES)
def _cached_table(folder: str, content_hash: str, width: int, std: float) -> torch.Tensor:
    # content_hash is only part of the key: a changed encoder hashes differently, so it misses.
    del content_hash
    with _one_thread():  # the std's reduction too: its last bit would change the table's hash
        projected = principal_projection(read_word_embeddings(Path(folder)), width)
        return scaled_to_std(projected, std).to(torch.float32)


def subword_table(settings: SubwordSettings, width: int) -> torch.Tensor:
    """The projected, scaled embedding table (V, width) of ``settings.source`` (a copy: the cached
    one is never handed out)."""
    folder = resolve_checkpoint_dir(settings.source).resolve()
    table = _cached_table(str(folder), hash_checkpoint_files(folder), width, settings.std)
    return table.clone()


def load_subword_tokenizer(settings: SubwordSettings) -> Any:
    """The encoder's own WordPiece tokenizer, read from its folder (nothing is downloaded)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(resolve_checkpoint_dir(settings.source)))
    if tokenizer.pad_token_id is None or tokenizer.unk_token_id is None:
        raise ValueError(
            f"the tokenizer of {settings.source} has no [PAD] or [UNK] token: SubwordSettings.source must be a "
            "BERT-style encoder with a WordPiece tokenizer"
        )
    return tokenizer


def freeze_subword_table(model: nn.Module, settings: SubwordSettings) -> None:
    """Train the embedding table or not, as ``settings.train_embeddings`` says (a model loaded from
    a version comes back with every weight trainable)."""
    hf(model).get_input_embeddings().weight.requires_grad_(settings.train_embeddings)


def build_tiny_base(config: PolicyConfig, tokenizer: Any) -> nn.Module:
    """The tiny model as ``config`` builds it: random weights from ``config.tiny.seed``, and with
    ``config.subwords`` its embedding table replaced by the encoder's projected one ([PAD] kept zero,
    as the tiny model's padding row is)."""
    model = build_tiny_model(config.tiny, tokenizer)
    if config.subwords is None:
        return model
    table = subword_table(config.subwords, config.tiny.hidden_size)  # (V, D)
    embedding = hf(model).get_input_embeddings()
    if table.shape != embedding.weight.shape:
        raise ValueError(
            f"the encoder's embedding table has {table.shape[0]} rows but the tokenizer {len(tokenizer)} tokens: "
            f"SubwordSettings.source ({config.subwords.source}) must hold the tokenizer the policy uses"
        )
    with torch.no_grad():
        embedding.weight.copy_(table)
        if embedding.padding_idx is not None:
            embedding.weight[embedding.padding_idx].zero_()
    freeze_subword_table(model, config.subwords)
    return model


def tiny_base_salt(config: PolicyConfig, tokenizer: Any) -> str:
    """What the tiny base's hash mixes in beside its weights: the vocabulary size, and with the
    semantic match feature (``SubwordSettings.semantic_match``) or the contextual states
    (``SubwordSettings.context_states``) the encoder folder's content hash, since the whole encoder
    (not only the word-piece table the weights hold) then shapes the inputs: a version never loads
    onto another encoder's similarities or states (the trunk is not saved with a version). Without
    either the salt is what it always was, so earlier versions keep their hashes. Word pooling
    (``SubwordSettings.pool_words``) adds its name: pooled and unpooled models never share a hash;
    the semantic feature's scope (``SubwordSettings.semantic_labels``, ``semantic_paths``,
    ``semantic_value_paths``) its digest."""
    salt = repr(len(tokenizer))
    subwords = config.subwords
    if subwords is not None and (subwords.semantic_match or subwords.context_states):
        identity = hash_checkpoint_files(resolve_checkpoint_dir(subwords.source).resolve())
        salt += f" semantic {identity}" if subwords.semantic_match else ""
        salt += f" context {identity}" if subwords.context_states else ""
    if subwords is not None and subwords.pool_words:  # the same weights read other inputs
        salt += " words"
    if subwords is not None and subwords.semantic_labels:  # the feature's scope shapes the inputs
        margin = subwords.semantic_margin  # only when set, so unmargined scopes keep their hashes
        scope = json.dumps([subwords.semantic_labels, margin] if margin else subwords.semantic_labels)
        if subwords.semantic_paths:  # only when set, so app-only scopes keep their hashes
            scope += json.dumps(subwords.semantic_paths)
        if subwords.semantic_value_paths:  # likewise: routes read without the values keep theirs
            scope += " values " + json.dumps(subwords.semantic_value_paths)
        salt += f" scope {hashlib.sha256(scope.encode()).hexdigest()[:16]}"
    return salt
