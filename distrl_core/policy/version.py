"""Policy version directories: everything a collector needs to act like the learner's policy.

Layout::

    <dir>/policy.json     PolicyConfig (how to build and run the policy)
    <dir>/base.json       the base model's pointer and content hash
    <dir>/tokenizer/      tokenizer (save_pretrained)
    <dir>/processor/      the AutoProcessor of a vision-language base
    <dir>/model/          full weights (tiny default, or a base trained without LoRA)
    <dir>/adapter/        the LoRA adapter (a pretrained base with LoRA)
    <dir>/heads.pt        the heads (scores, critics, and the separate critic's encoder)

For a LoRA version the base is loaded from its pointer and must hash to the recorded value: an
adapter applied to other weights is silently wrong, so a mismatch is an error naming both hashes.
Tiny versions carry their full weights, and their base (rebuilt from config and seed) is checked
the same way, which catches a changed model config or initialisation code.

A weights file that cannot be read is a `PolicyFileError` naming the version directory and the
file: a damaged file must be fetched again, and torch's own message for it ("load with
weights_only=False") would suggest running code from the file. (Files are checked against the
version's manifest when the registry fetches them, `storage.registry`.)
"""

from __future__ import annotations

import json
import pickle
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import torch

from distrl_core.policy.backbone import (
    HASH_METHOD,
    hash_checkpoint_files,
    hash_state_dict,
    hf,
    load_full_weights,
    load_pretrained,
    resolve_checkpoint_dir,
)
from distrl_core.policy.config import PolicyConfig
from distrl_core.policy.model import BaseInfo, Policy, build_heads
from distrl_core.policy.subwords import build_tiny_base, freeze_subword_table, tiny_base_salt

__all__ = ["BaseMismatchError", "PolicyFileError", "load_policy", "save_policy"]

FORMAT_VERSION = 1
_T = TypeVar("_T")

# Collectors load in threads; building a model forks torch's global RNG state and restores it on exit,
# and two interleaved forks would restore each other's. (The tiny weights themselves come from a
# private generator, see backbone._seeded, so their hash no longer depends on other threads.)
_build_lock = threading.Lock()


class BaseMismatchError(ValueError):
    """The base weights found do not hash to what the version was trained on."""


class PolicyFileError(ValueError):
    """A file of a policy version cannot be read: damaged, truncated or not what its name says."""


def _read_weights(directory: Path, name: str, read: Callable[[], _T]) -> _T:
    try:
        return read()
    except (pickle.UnpicklingError, EOFError, OSError, RuntimeError, ValueError) as exc:
        # Not chained (`from None`) and not quoted: torch's message for an unpicklable file advises
        # weights_only=False, which would execute whatever the damaged file contains.
        raise PolicyFileError(
            f"policy version {directory}: {name} cannot be read ({type(exc).__name__}); the file is damaged. "
            "Fetch the version again (delete its cached copy) or publish a new one."
        ) from None
    except Exception as exc:
        if type(exc).__name__ != "SafetensorError":  # safetensors' Rust error has no importable base
            raise
        raise PolicyFileError(
            f"policy version {directory}: {name} cannot be read (SafetensorError); the file is damaged. "
            "Fetch the version again (delete its cached copy) or publish a new one."
        ) from None


def save_policy(policy: Policy, directory: str | Path) -> Path:
    """Write the version directory (created if needed; existing files are replaced)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "policy.json").write_text(json.dumps(policy.config.to_dict(), indent=2))
    base = {
        "format": FORMAT_VERSION,
        "kind": policy.base.kind,
        "pointer": policy.base.pointer,
        "hash": policy.base.hash,
    }
    if policy.base.kind == "pretrained":
        base["hash_method"] = HASH_METHOD
    (directory / "base.json").write_text(json.dumps(base, indent=2))
    policy.tokenizer.save_pretrained(directory / "tokenizer")
    if policy.processor is not None:
        policy.processor.save_pretrained(directory / "processor")
    if policy.config.lora is not None:
        hf(policy.model).save_pretrained(directory / "adapter")
    else:
        hf(policy.model).save_pretrained(directory / "model")
    torch.save(policy.heads.state_dict(), directory / "heads.pt")
    return directory


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: {path.parent} is not a policy version directory")
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def _check_hash(expected: str, actual: str, what: str, directory: Path, fix: str) -> None:
    if expected != actual:
        raise BaseMismatchError(
            f"policy version {directory} was trained on {what} with base hash {expected}, but the base "
            f"found now hashes to {actual}. {fix}"
        )


def load_policy(
    directory: str | Path, *, base_override: str | None = None, device: str | None = None
) -> Policy:
    """Load a version directory. ``base_override`` points a LoRA version at another copy of its
    base (e.g. a local path instead of a hub id); its hash must still match. Thread-safe."""
    directory = Path(directory)
    config = PolicyConfig.from_dict(_read_json(directory / "policy.json"))
    if device is not None:
        config.device = device
    base = _read_json(directory / "base.json")
    with _build_lock:
        return _build(directory, config, base, base_override)


def _load_encoder_version(
    directory: Path, config: PolicyConfig, base: dict[str, Any], pointer: str
) -> tuple[Any, str]:
    """An encoder version: the base from its pointer (hash-checked), its trained top layers."""
    from distrl_core.policy.encoder import load_encoder

    assert config.encoder is not None
    actual = hash_checkpoint_files(resolve_checkpoint_dir(pointer))
    _check_hash(
        base["hash"], actual, f"base {base['pointer']!r}", directory,
        "Point base_override at the exact encoder the version was trained on (same files).",
    )  # fmt: skip
    model, _ = load_encoder(resolve_checkpoint_dir(pointer), config.encoder)
    _read_weights(directory, "model/", lambda: model.load_trained(directory / "model"))
    return model, actual


def _build(directory: Path, config: PolicyConfig, base: dict[str, Any], base_override: str | None) -> Policy:
    from transformers import AutoProcessor, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(directory / "tokenizer")
    processor = (
        AutoProcessor.from_pretrained(directory / "processor")  # type: ignore[no-untyped-call]
        if config.vision
        else None
    )
    if processor is not None:
        tokenizer = processor.tokenizer
    if base["kind"] == "tiny":
        fresh = build_tiny_base(config, tokenizer)
        actual = hash_state_dict(fresh, tiny_base_salt(config, tokenizer))
        subwords = "" if config.subwords is None else f" on the sub-words of {config.subwords.source}"
        _check_hash(
            base["hash"], actual, f"the tiny model {base['pointer']}{subwords}", directory,
            "The tiny model's config or initialisation code (or the encoder its sub-word table is projected "
            "from, or whose similarities or contextual states it reads: SubwordSettings.source) changed since "
            "it was saved; load it with the distrl version and the exact encoder files that wrote it, or "
            "retrain from a fresh warm start.",
        )  # fmt: skip
        model = _read_weights(directory, "model/", lambda: load_full_weights(config, directory / "model"))
        if config.subwords is not None:
            freeze_subword_table(model, config.subwords)  # loaded weights come back all trainable
    else:
        pointer = base_override or base["pointer"]
        if config.encoder is not None:
            model, actual = _load_encoder_version(directory, config, base, str(pointer))
        elif config.lora is None:
            model = _read_weights(directory, "model/", lambda: load_full_weights(config, directory / "model"))
            actual = base["hash"]  # full weights are in the version; the base is only provenance
        else:
            from peft import PeftModel

            model, _ = load_pretrained(config, pointer)
            actual = hash_checkpoint_files(resolve_checkpoint_dir(str(pointer)))
            _check_hash(
                base["hash"], actual, f"base {base['pointer']!r}", directory,
                "Point base_override at the exact checkpoint the adapter was trained on "
                "(same files), or retrain the adapter on this base.",
            )  # fmt: skip
            model = PeftModel.from_pretrained(model, directory / "adapter", is_trainable=True)
    heads = build_heads(config, model, tokenizer)
    state = _read_weights(
        directory,
        "heads.pt",
        lambda: torch.load(directory / "heads.pt", map_location="cpu", weights_only=True),
    )
    heads.load_state_dict(state)
    info = BaseInfo(base["kind"], base["pointer"], base["hash"] if base["kind"] == "tiny" else actual)
    return Policy(config, model, tokenizer, heads, info, processor)
