"""Backbones: the tiny default built from a config, or any Hugging Face model; LoRA; base hashes.

A base hash identifies the weights a version was trained from. For the tiny default it is the
SHA-256 of the freshly initialised weights (deterministic by seed) and of its config; for a
pretrained base it is the SHA-256 of the checkpoint's config and weight files, computed once per
checkpoint: reading 0.5 GB takes ~20 s here, and every collector loads every version. The result is
cached in memory and in a JSON file (``DISTRL_HASH_CACHE``, default ~/.cache/distrl/) keyed by
the directory and each file's name, size and modification time; any change to them rehashes.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import torch
from torch import nn

from distrl_core.policy.config import LoraSettings, PolicyConfig, TinyModelConfig

__all__ = [
    "HASH_METHOD",
    "FrozenEncoders",
    "HFModel",
    "apply_lora",
    "build_tiny_encoder",
    "build_tiny_model",
    "frozen_encoder",
    "hash_checkpoint_files",
    "hash_state_dict",
    "language_model_linears",
    "load_full_weights",
    "load_pretrained",
    "resolve_checkpoint_dir",
]

ModuleT = TypeVar("ModuleT", bound=nn.Module)


class HFModel(Protocol):
    """What the policy uses of a Hugging Face model beyond ``nn.Module`` (PEFT wrappers forward it)."""

    def get_input_embeddings(self) -> nn.Embedding: ...

    def get_decoder(self) -> nn.Module: ...  # a causal LM's body, without its LM head

    def save_pretrained(self, save_directory: str | os.PathLike[str]) -> Any: ...


def hf(model: nn.Module) -> HFModel:
    """``model`` seen as a Hugging Face model: ``nn.Module``'s typing cannot say these methods exist."""
    return cast(HFModel, model)


_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".json", ".model", ".txt")


def _tiny_llama_config(config: TinyModelConfig, tokenizer: Any) -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_heads,
        max_position_embeddings=config.max_positions,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
        attention_dropout=0.0,
    )


def build_tiny_model(config: TinyModelConfig, tokenizer: Any) -> nn.Module:
    """A Llama-style causal LM with random weights drawn from ``config.seed`` alone (see `_seeded`)."""
    from transformers import LlamaForCausalLM

    with torch.random.fork_rng(devices=[]):  # the constructor's own draws leave the global state as it was
        model = _seeded(LlamaForCausalLM(_tiny_llama_config(config, tokenizer)), config.seed)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def build_tiny_encoder(config: TinyModelConfig, tokenizer: Any, seed: int) -> nn.Module:
    """The same shape without the LM head (the separate critic's encoder), weights from ``seed``."""
    from transformers import LlamaModel

    with torch.random.fork_rng(devices=[]):
        return _seeded(LlamaModel(_tiny_llama_config(config, tokenizer)), seed)


def _seeded(model: ModuleT, seed: int) -> ModuleT:
    """Every parameter drawn again from a private generator seeded with `seed`, as Llama's own
    initialisation lays them out (normal(0, initializer_range) matrices, padding row zero, norms one).

    The constructor draws from torch's global generator, which other threads (the learner's dropout,
    collectors) draw from at the same time: seeding it first still gave a load's hash check a
    different model now and then. A private generator makes the weights a function of `seed` alone.
    """
    generator = torch.Generator().manual_seed(seed)
    std = float(getattr(model.config, "initializer_range", 0.02))
    with torch.no_grad():
        for name, param in model.named_parameters():  # registration order: the same on every build
            if param.dim() > 1:
                param.normal_(0.0, std, generator=generator)
            else:
                param.fill_(1.0 if "norm" in name else 0.0)
        for module in model.modules():
            if isinstance(module, nn.Embedding) and module.padding_idx is not None:
                module.weight[module.padding_idx].zero_()
    return model


def resolve_checkpoint_dir(pointer: str) -> Path:
    """A local directory as is; a hub id through the local Hugging Face cache (never downloads
    when HF_HUB_OFFLINE=1, the project's default)."""
    path = Path(pointer).expanduser()
    if path.is_dir():
        return path
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(pointer, local_files_only=os.environ.get("HF_HUB_OFFLINE") == "1"))
    except Exception as exc:
        raise FileNotFoundError(
            f"policy base {pointer!r} is neither a local directory nor a hub id in the local cache "
            f"({type(exc).__name__}: {exc}); download it once with network access or give a local path"
        ) from exc


HASH_METHOD = (
    "sha256 over the names and contents of the checkpoint's config and weight files; computed once "
    "per checkpoint, cached by directory and each file's name, size and mtime"
)
_hash_memo: dict[str, tuple[list[Any], str]] = {}
_hash_lock = threading.Lock()


def _hash_cache_file() -> Path:
    default = Path.home() / ".cache" / "distrl" / "checkpoint_hashes.json"
    return Path(os.environ.get("DISTRL_HASH_CACHE") or default)


def _read_hash_cache(path: Path) -> dict[str, Any]:
    try:
        cache: dict[str, Any] = json.loads(path.read_text())
        return cache
    except (OSError, ValueError):
        return {}  # absent or torn: rehash, nothing is lost but time


def hash_checkpoint_files(directory: Path) -> str:
    """SHA-256 over the names and contents of a checkpoint's config and weight files (cached)."""
    directory = Path(directory).resolve()
    files = sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix in _WEIGHT_SUFFIXES)
    if not files:
        raise FileNotFoundError(f"no model files (config, weights) under {directory}")
    stamp = [[str(p.relative_to(directory)), p.stat().st_size, p.stat().st_mtime_ns] for p in files]
    key = str(directory)
    with _hash_lock:
        memo = _hash_memo.get(key)
        if memo is None:
            cached = _read_hash_cache(_hash_cache_file()).get(key)
            memo = (cached["files"], cached["hash"]) if cached else None
        if memo is not None and memo[0] == stamp:
            _hash_memo[key] = memo
            return memo[1]
    value = _hash_files(directory, files)
    with _hash_lock:
        _hash_memo[key] = (stamp, value)
        cache_file = _hash_cache_file()
        try:
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            entries = _read_hash_cache(cache_file) | {key: {"files": stamp, "hash": value}}
            staging = cache_file.with_name(f"{cache_file.name}.{os.getpid()}.tmp")
            staging.write_text(json.dumps(entries))
            os.replace(staging, cache_file)  # atomic: concurrent collectors never read a torn file
        except OSError:
            pass  # a read-only home: the in-memory cache still spares this process
    return value


def _hash_files(directory: Path, files: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(directory)).encode() + b"\0")
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def hash_state_dict(model: nn.Module, extra: str = "") -> str:
    """SHA-256 over parameter names, shapes, dtypes and bytes (tied weights counted once)."""
    digest = hashlib.sha256(extra.encode())
    for name, tensor in sorted(model.state_dict().items()):
        data = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}:{tuple(data.shape)}:{data.dtype}".encode())
        digest.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
    return digest.hexdigest()


def load_pretrained(config: PolicyConfig, pointer: str | Path | None = None) -> tuple[nn.Module, Any]:
    """The base model and its tokenizer (or processor, for ``vision``) from a dir or hub id."""
    from transformers import AutoModelForCausalLM, AutoProcessor, AutoTokenizer

    source = str(pointer or config.base)
    if config.vision:
        from transformers import AutoModelForImageTextToText

        processor = AutoProcessor.from_pretrained(source)  # type: ignore[no-untyped-call]
        model = AutoModelForImageTextToText.from_pretrained(source)
        return model, processor
    tokenizer = AutoTokenizer.from_pretrained(source)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(source)
    return model, tokenizer


def load_full_weights(config: PolicyConfig, directory: Path) -> nn.Module:
    """A version's saved full weights (no adapter), with the class the policy was built with."""
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    loader = AutoModelForImageTextToText if config.vision else AutoModelForCausalLM
    return loader.from_pretrained(directory)


def language_model_linears(model: nn.Module) -> list[str]:
    """Full names of the linear layers of a vision-language model's text decoder (its
    ``get_decoder()``): where "all-linear" LoRA goes on such a base. PEFT's own "all-linear" would
    also adapt the vision tower and the projector, which the policy's text loss barely trains and
    which differ between families (Gemma 3's SigLIP tower, Idefics3's connector)."""
    decoder = hf(model).get_decoder()
    prefix = next(name for name, module in model.named_modules() if module is decoder)
    return [
        f"{prefix}.{name}"
        for name, module in decoder.named_modules()
        if isinstance(module, nn.Linear) and name  # the decoder's own layers, never the LM head
    ]


def apply_lora(model: nn.Module, settings: LoraSettings) -> nn.Module:
    from peft import LoraConfig, get_peft_model

    targets = settings.target_modules
    if targets == "all-linear" and getattr(getattr(model, "config", None), "vision_config", None) is not None:
        targets = language_model_linears(model)
    lora = LoraConfig(
        r=settings.r,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=targets,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lora)


def frozen_encoder(folder: Path) -> tuple[Any, Any]:
    """(tokenizer, model) of the Hugging Face encoder in ``folder``, in eval mode with every weight
    frozen: what the caches of encoder outputs (``policy.semantic_match``, ``policy.context_states``)
    run texts through."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModel.from_pretrained(str(folder)).eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return tokenizer, model


class FrozenEncoders:
    """Frozen encoders (``frozen_encoder``) by folder, loaded again when the folder's files change
    (``hash_checkpoint_files``): a cache of their outputs keys them by that hash."""

    def __init__(self) -> None:
        self._loaded: dict[str, tuple[str, Any, Any]] = {}  # folder -> (hash, tokenizer, model)

    def clear(self) -> None:
        self._loaded.clear()

    def get(self, folder: Path) -> tuple[tuple[str, Any, Any], str | None]:
        """((hash, tokenizer, model), the hash of the encoder this load replaced, or None)."""
        identity = hash_checkpoint_files(folder)
        known = self._loaded.get(str(folder))
        if known is not None and known[0] == identity:
            return known, None
        self._loaded[str(folder)] = (identity, *frozen_encoder(folder))
        return self._loaded[str(folder)], None if known is None else known[0]
