"""The words of the tiny default policy's tokenizer, one file per corpus split.

Written by ``python -m simulators.corpus --write`` from the text a SimDroid policy reads (the
split's instructions, the screens the scripted expert sees, the candidate texts), so that the core
builds its default tokenizer without importing the simulator. A test checks them against a fresh
corpus.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "APP_LABELS_PATH",
    "CONTROL_PATHS_PATH",
    "CORPUS_SPLITS",
    "VALUE_PATHS_PATH",
    "VOCABULARY_DIR",
    "app_labels",
    "control_paths",
    "value_paths",
    "vocabulary_path",
    "vocabulary_words",
]

VOCABULARY_DIR = Path(__file__).resolve().parent / "vocabulary"
# "fit", "fit_words", "fit_unseen": the train split less its validation tasks (validation_split,
# with words=True, unseen_split)
CORPUS_SPLITS = ("train", "test", "fit", "fit_words", "fit_unseen")
# SimDroid's installed apps, one name a line as its launcher labels them: the scope of the semantic
# match feature of base "tiny-minilm-apps" (``SubwordSettings.semantic_labels``).
APP_LABELS_PATH = VOCABULARY_DIR / "app_labels.txt"
# The routes to SimDroid's controls, one a line ("Settings > Network & internet > Wi-Fi"): the paths
# of base "tiny-minilm-controls"'s feature (``SubwordSettings.semantic_paths``).
CONTROL_PATHS_PATH = VOCABULARY_DIR / "control_paths.txt"
# Those that end at a control taking a value (a field typed into, a slider), through it: base
# "tiny-minilm-words-values"'s ``SubwordSettings.semantic_value_paths``.
VALUE_PATHS_PATH = VOCABULARY_DIR / "value_paths.txt"


def vocabulary_path(split: str) -> Path:
    if split not in CORPUS_SPLITS:
        raise ValueError(f"vocabulary split must be one of {CORPUS_SPLITS}, got {split!r}")
    return VOCABULARY_DIR / f"{split}.txt"


def vocabulary_words(split: str = "train") -> tuple[str, ...]:
    """The split's words, sorted, as ``python -m simulators.corpus --write`` wrote them."""
    return tuple(vocabulary_path(split).read_text(encoding="utf-8").split())


def app_labels() -> tuple[str, ...]:
    """SimDroid's app names in launcher order, as ``python -m simulators.corpus --write`` wrote them."""
    return _lines(APP_LABELS_PATH)


def _lines(path: Path) -> tuple[str, ...]:
    return tuple(line for line in path.read_text(encoding="utf-8").splitlines() if line)


def control_paths() -> tuple[str, ...]:
    """The routes to SimDroid's controls, as ``python -m simulators.corpus --write`` wrote them."""
    return _lines(CONTROL_PATHS_PATH)


def value_paths() -> tuple[str, ...]:
    """The routes to SimDroid's controls that take a value, as ``simulators.corpus --write`` wrote them."""
    return _lines(VALUE_PATHS_PATH)
