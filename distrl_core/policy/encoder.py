"""An encoder base (BERT-style, e.g. all-MiniLM-L6-v2) with frozen lower layers and a cache of
their outputs per text.

Full fine-tuning of even a 22.7 M-parameter encoder is out of reach on two CPU cores (104 s per
step on 32 observations and 80 candidates). So the embeddings and the lower layers are frozen,
and what they produce for a text is computed once and kept: the learner re-reads the same
observation and candidate texts at every update (a replayed step, the keys and swipes every screen
offers), and only the top ``EncoderSettings.trainable_layers`` layers run with gradients.

The cache is one per process, least-recently-used with a byte cap, and keyed by the text and the
*identity* of the frozen part: the SHA-256 of its weights (names, shapes, bytes) and of where the
split lies. Loading other frozen weights (``load_state_dict``) recomputes the identity, so a cached
value never outlives a base change. Missing texts are computed in padded, masked batches; a value
then differs from the same text computed alone only by rounding (checked to 1e-5 by the tests).
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from distrl_core.policy.config import EncoderSettings

__all__ = ["EncoderBackbone", "FrozenStateCache", "load_encoder", "shared_cache"]

TRAINABLE_FILE = "trainable.safetensors"
MISS_CHUNK = 16  # texts per forward of the frozen layers when filling the cache
TOP_CHUNK = 32  # texts per forward of the trainable layers, sorted by length so each chunk pads little


class FrozenStateCache:
    """(identity, text) -> the frozen layers' output (T, D), least recently used evicted first
    once the stored tensors exceed ``max_bytes``. Thread-safe (collectors act in threads)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[tuple[str, str], torch.Tensor] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __deepcopy__(self, memo: dict[int, object]) -> FrozenStateCache:
        """The process's one cache: a copied policy (each collector thread acts on its own copy)
        shares it; its keys carry the frozen weights' identity, so sharing is safe."""
        return self

    def get(self, identity: str, text: str) -> torch.Tensor | None:
        with self._lock:
            value = self._entries.get((identity, text))
            if value is None:
                self.misses += 1
                return None
            self._entries.move_to_end((identity, text))
            self.hits += 1
            return value

    def put(self, identity: str, text: str, value: torch.Tensor) -> None:
        size = value.numel() * value.element_size()
        if size > self.max_bytes:
            return  # larger than the whole cache: recomputed each time rather than evicting everything
        with self._lock:
            old = self._entries.pop((identity, text), None)
            if old is not None:
                self.bytes -= old.numel() * old.element_size()
            self._entries[(identity, text)] = value
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self.bytes -= evicted.numel() * evicted.element_size()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0


_shared: FrozenStateCache | None = None
_shared_lock = threading.Lock()


def shared_cache(max_bytes: int) -> FrozenStateCache:
    """The process's cache; its cap is the largest any encoder policy of the process asked for."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = FrozenStateCache(max_bytes)
        _shared.max_bytes = max(_shared.max_bytes, max_bytes)
        return _shared


class EncoderBackbone(nn.Module):
    """A Hugging Face encoder split in two: embeddings and layers below ``split`` frozen (run
    without gradient, output cached per text), the layers from ``split`` on trained."""

    def __init__(self, encoder: nn.Module, tokenizer: Any, settings: EncoderSettings) -> None:
        super().__init__()
        self.encoder: Any = encoder  # a Hugging Face encoder (BertModel): attributes typing cannot see
        self.tokenizer = tokenizer
        self.settings = settings
        layers = self._layers()
        if settings.trainable_layers > len(layers):
            raise ValueError(
                f"EncoderSettings.trainable_layers is {settings.trainable_layers} but the base has only "
                f"{len(layers)} layers"
            )
        self.split = len(layers) - settings.trainable_layers
        for name, param in self.encoder.named_parameters():
            param.requires_grad_(self._trainable(name))
        self.cache = shared_cache(settings.cache_megabytes * 2**20)
        self._token_ids = functools.lru_cache(maxsize=1 << 16)(self._token_ids_uncached)
        self._token_offsets = functools.lru_cache(maxsize=1 << 14)(self._token_offsets_uncached)
        self.identity = self._frozen_identity()
        # torch leaves the hook registration unannotated
        self.register_load_state_dict_post_hook(  # type: ignore[no-untyped-call]
            lambda module, keys: module._refresh_identity()
        )

    def reserve_for_learning(self) -> None:
        """Raise the process's cache cap to ``learner_cache_megabytes``: a learner re-reads its replay."""
        self.cache = shared_cache(self.settings.learner_cache_megabytes * 2**20)

    # ----- what the policy reads of a Hugging Face model ------------------------------------------
    @property
    def config(self) -> Any:
        return self.encoder.config

    def get_input_embeddings(self) -> nn.Embedding:
        embeddings: nn.Embedding = self.encoder.get_input_embeddings()
        return embeddings

    def _layers(self) -> nn.ModuleList:
        layers: nn.ModuleList = self.encoder.encoder.layer
        return layers

    def _trainable(self, name: str) -> bool:
        """Top layers (``encoder.layer.<i>`` with i >= split); the pooler is never used."""
        parts = name.split(".")
        return (
            len(parts) > 2 and parts[0] == "encoder" and parts[1] == "layer" and int(parts[2]) >= self.split
        )

    def trainable_state(self) -> dict[str, torch.Tensor]:
        return {n: p.detach().contiguous() for n, p in self.encoder.named_parameters() if p.requires_grad}

    def save_pretrained(self, directory: str | Path) -> None:
        """Only the trained layers: the frozen rest is the base, found again by its hash."""
        from safetensors.torch import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        save_file({n: t.cpu() for n, t in self.trainable_state().items()}, str(directory / TRAINABLE_FILE))

    def load_trained(self, directory: str | Path) -> None:
        from safetensors.torch import load_file

        state = load_file(str(Path(directory) / TRAINABLE_FILE))
        expected = set(self.trainable_state())
        if set(state) != expected:
            raise ValueError(
                f"{directory} holds trained layers {sorted(state)[:3]}..., not the {len(expected)} tensors of "
                f"trainable_layers={self.settings.trainable_layers}; load it with the policy.json it was saved with"
            )
        self.encoder.load_state_dict(state, strict=False)

    # ----- identity of the frozen part ------------------------------------------------------------
    def _frozen_identity(self) -> str:
        digest = hashlib.sha256(f"split={self.split}".encode())
        for name, tensor in sorted(self.encoder.state_dict().items()):
            if self._trainable(name) or name.startswith("pooler."):
                continue
            data = tensor.detach().to("cpu").contiguous()
            digest.update(f"{name}:{tuple(data.shape)}:{data.dtype}".encode())
            digest.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
        return digest.hexdigest()

    def _refresh_identity(self) -> None:
        self.identity = self._frozen_identity()

    # ----- encoding -------------------------------------------------------------------------------
    def token_ids(self, text: str) -> tuple[int, ...]:
        """[CLS] text [SEP] as token ids, cut at ``max_tokens``."""
        return self._token_ids(text)

    def _token_ids_uncached(self, text: str) -> tuple[int, ...]:
        ids = self.tokenizer(text, truncation=True, max_length=self.settings.max_tokens)["input_ids"]
        return tuple(ids)

    def token_offsets(self, text: str) -> tuple[tuple[int, int], ...]:
        """Per token of ``token_ids(text)``, its [start, end) characters in ``text`` ((0, 0) for
        [CLS] and [SEP])."""
        return self._token_offsets(text)

    def _token_offsets_uncached(self, text: str) -> tuple[tuple[int, int], ...]:
        encoded = self.tokenizer(
            text, truncation=True, max_length=self.settings.max_tokens, return_offsets_mapping=True
        )
        return tuple((int(a), int(b)) for a, b in encoded["offset_mapping"])

    @torch.no_grad()
    def _frozen_batch(self, texts: Sequence[str]) -> list[torch.Tensor]:
        """The frozen layers over texts padded to one batch (attention masked), each cut back to
        its own length: padding changes a value only by rounding (~1e-6), far below 1e-5."""
        from transformers.masking_utils import create_bidirectional_mask

        device = next(self.encoder.parameters()).device
        rows = [self.token_ids(text) for text in texts]
        lengths = torch.tensor([len(r) for r in rows])
        ids = torch.zeros(len(rows), int(lengths.max()), dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row)
        mask = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).long().to(device)
        was_training = self.encoder.training
        self.encoder.eval()  # the frozen part never drops out
        try:
            hidden = self.encoder.embeddings(input_ids=ids.to(device))
            attention = create_bidirectional_mask(
                config=self.encoder.config, inputs_embeds=hidden, attention_mask=mask
            )
            for layer in self._layers()[: self.split]:
                hidden = layer(hidden, attention)
        finally:
            self.encoder.train(was_training)
        return [hidden[i, : len(row)].float().contiguous() for i, row in enumerate(rows)]

    def frozen_states(self, texts: Sequence[str], *, use_cache: bool = True) -> list[torch.Tensor]:
        """The frozen layers' output (T_i, D) of each text, from the cache where present; the
        missing ones are computed in length-sorted padded chunks of ``MISS_CHUNK`` texts."""
        out: list[torch.Tensor | None] = [
            self.cache.get(self.identity, text) if use_cache else None for text in texts
        ]
        missing = sorted({t for t, v in zip(texts, out, strict=True) if v is None}, key=len)
        computed: dict[str, torch.Tensor] = {}
        for start in range(0, len(missing), MISS_CHUNK):
            chunk = missing[start : start + MISS_CHUNK]
            computed.update(zip(chunk, self._frozen_batch(chunk), strict=True))
        if use_cache:
            for text, value in computed.items():
                self.cache.put(self.identity, text, value)
        return [v if v is not None else computed[t] for t, v in zip(texts, out, strict=True)]

    def top_states(self, states: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The trainable layers' output (T_i, D) of each text's frozen states, run over
        length-sorted chunks (``length_sorted_chunks``)."""
        out: list[torch.Tensor] = [torch.empty(0)] * len(states)
        for chunk in length_sorted_chunks([len(s) for s in states]):
            hidden, _ = self.top([states[i] for i in chunk])
            for j, i in enumerate(chunk):
                out[i] = hidden[j, : len(states[i])]
        return out

    def top(self, states: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """The trainable layers over padded frozen states: hidden (N, T, D) and mask (N, T)."""
        return self._padded_through(states, list(self._layers()[self.split :]))

    def top_prefix(self, states: Sequence[torch.Tensor], width: int) -> torch.Tensor:
        """What ``top`` gives at the first ``width`` positions (N, width, D), with the last trainable
        layer run at those positions alone: the learner's actor reads only the instruction's
        tokens, so the rest of that layer's forward and backward would be spent on nothing."""
        layers = list(self._layers()[self.split :])
        hidden, mask = self._padded_through(states, layers[:-1])
        if not layers:
            return hidden[:, :width]
        return layer_at_prefix(layers[-1], hidden, mask, width)

    def _padded_through(
        self, states: Sequence[torch.Tensor], layers: Sequence[nn.Module]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """States padded to one batch (N, T, D) and run through ``layers``; the mask (N, T)."""
        from transformers.masking_utils import create_bidirectional_mask

        lengths = torch.tensor([len(s) for s in states])
        hidden = torch.nn.utils.rnn.pad_sequence(list(states), batch_first=True)
        mask = (torch.arange(hidden.shape[1])[None, :] < lengths[:, None]).long().to(hidden.device)
        if layers:
            attention = create_bidirectional_mask(
                config=self.encoder.config, inputs_embeds=hidden, attention_mask=mask
            )
            for layer in layers:
                hidden = layer(hidden, attention)
        return hidden, mask


def length_sorted_chunks(lengths: Sequence[int]) -> list[list[int]]:
    """Indices of texts in chunks of ``TOP_CHUNK``, sorted by length so that each padded chunk
    pads little."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[start : start + TOP_CHUNK] for start in range(0, len(order), TOP_CHUNK)]


def layer_at_prefix(layer: Any, hidden: torch.Tensor, mask: torch.Tensor, width: int) -> torch.Tensor:
    """A BERT layer's output at the first ``width`` positions only: (N, T, D) -> (N, width, D).

    Every position still serves as key and value, so the result equals the full layer's output
    there; the queries, attention output and feed-forward run on ``width`` positions instead of T,
    and so does their backward. ``mask`` (N, T) is 1 at real tokens."""
    attend, out = layer.attention.self, layer.attention.output
    n, _, d = hidden.shape
    heads, size = attend.num_attention_heads, attend.attention_head_size

    def split_heads(x: torch.Tensor) -> torch.Tensor:  # (N, L, D) -> (N, H, L, S)
        return x.view(n, -1, heads, size).transpose(1, 2)

    query = split_heads(attend.query(hidden[:, :width]))
    key, value = split_heads(attend.key(hidden)), split_heads(attend.value(hidden))
    scores = (query @ key.transpose(-1, -2)) * attend.scaling  # (N, H, width, T)
    scores = scores.masked_fill(~mask.bool()[:, None, None, :], float("-inf"))
    context = (scores.softmax(-1) @ value).transpose(1, 2).reshape(n, width, d)
    attended = out.LayerNorm(out.dense(context) + hidden[:, :width])
    output: torch.Tensor = layer.output.LayerNorm(layer.output.dense(layer.intermediate(attended)) + attended)
    return output


def load_encoder(base: str | Path, settings: EncoderSettings) -> tuple[EncoderBackbone, Any]:
    """The encoder at ``base`` (a local folder; nothing is downloaded) without dropout, split as
    ``settings`` says, and its tokenizer."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    config = AutoConfig.from_pretrained(base)
    # Dropout would make the learner's log π differ from the collector's for the same weights.
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
        if hasattr(config, name):
            setattr(config, name, 0.0)
    encoder = AutoModel.from_pretrained(base, config=config)  # its pooler is loaded, never used
    tokenizer = AutoTokenizer.from_pretrained(base)
    return EncoderBackbone(encoder, tokenizer, settings), tokenizer
