"""A small BERT-style encoder folder written on the spot (WordPiece tokenizer, random weights), so
that the sub-word design's tests run where all-MiniLM-L6-v2 is not installed, and can change the
encoder's weights to see that nothing computed from the old ones survives."""

from __future__ import annotations

from pathlib import Path

# The WordPiece vocabulary: the specials BERT's tokenizer expects, the tiny train vocabulary's words
# (so SimDroid prompts are mostly known) and a few continuation pieces (so an unknown word splits).
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PIECES = ["pizz", "##eria", "##s", "##ing", "##ed"]
WIDTH = 72  # the encoder's embedding width: above the tiny default's 64, so "tiny-minilm" can be built on it


def write_small_encoder(folder: Path, seed: int) -> Path:
    """A Hugging Face folder holding a 1-layer BERT (weights from ``seed``) and its tokenizer."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from distrl_core.policy.vocabulary import vocabulary_words

    folder.mkdir(parents=True, exist_ok=True)
    words = [w for w in vocabulary_words("train") if w.isalnum()]
    vocab = list(dict.fromkeys([*SPECIALS, *words, *(str(n) for n in range(101)), *PIECES, "|", ":", "%"]))
    tokenizer = BertTokenizerFast(vocab={token: i for i, token in enumerate(vocab)})
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=WIDTH,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = BertModel(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


SMALL_TINY_SETTINGS = {"hidden_size": 16, "num_heads": 2, "intermediate_size": 32}


def small_subword_config(folder: Path, **options):  # -> PolicyConfig
    """The small tiny model on the small encoder's sub-words; ``options`` split between
    ``SubwordSettings`` (its field names) and ``PolicyConfig`` (the rest)."""
    from dataclasses import fields

    from distrl_core.policy.config import PolicyConfig, SubwordSettings, TinyModelConfig

    names = {f.name for f in fields(SubwordSettings)}
    subwords = SubwordSettings(source=str(folder), **{k: v for k, v in options.items() if k in names})
    rest = {k: v for k, v in options.items() if k not in names}
    return PolicyConfig(device="cpu", tiny=TinyModelConfig(**SMALL_TINY_SETTINGS), subwords=subwords, **rest)


def steps_of(rows, count: int = 12) -> list:  # -> list[StepInput]
    """The first ``count`` stored step rows as the policy's step inputs."""
    from distrl_core.policy.types import StepInput

    return [StepInput(r["instruction"], r["observation_text"], r["action"]) for r in rows[:count]]
