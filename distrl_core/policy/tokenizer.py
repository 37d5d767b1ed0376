"""A word-level tokenizer built locally from SimDroid text (nothing downloaded), and word matching.

Word-level, so that a word is one token both in the instruction and in an element's label
(docs/architecture.md, "Design notes": sub-word splits that differ between the two kept a tiny model from grounding instructions). Words
are lower-cased runs of letters, runs of digits, or single other characters; a word never seen in
the corpus becomes ``[UNK]``. The exact-match flags of :func:`match_flags` carry the information an
unknown word would lose: whether the same word occurs in the instruction (the exact-match feature
of reading-comprehension models such as DrQA).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from transformers import PreTrainedTokenizerFast

__all__ = [
    "SPECIAL_TOKENS",
    "build_word_tokenizer",
    "match_flags",
    "shares_words",
    "split_words",
]

WORD_PATTERN = r"[a-z]+|\d+|[^\sa-z\d]"
_WORD = re.compile(WORD_PATTERN)
SPECIAL_TOKENS = {"pad": "[PAD]", "unk": "[UNK]", "bos": "[BOS]", "eos": "[EOS]"}
# Words too common to say anything when they occur both in the instruction and in a candidate.
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "to",
        "for",
        "of",
        "in",
        "at",
        "and",
        "or",
        "is",
        "it",
        "my",
        "me",
        "i",
        "you",
        "your",
        "can",
        "could",
        "please",
        "that",
        "this",
        "with",
    ]
)

# Flag values: anything else; a word that also occurs in the instruction; an instruction word; an
# instruction word that also occurs later in the text (on screen).
FLAG_OTHER, FLAG_MATCH, FLAG_INSTRUCTION, FLAG_INSTRUCTION_MATCHED = 0, 1, 2, 3


def split_words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _normal(word: str) -> str:
    # "07" on a clock and "7" in an instruction are the same number
    return str(int(word)) if word.isdigit() else word


def match_flags(
    text: str, offsets: list[tuple[int, int]], instruction: str, instruction_chars: int
) -> list[int]:
    """One flag per token (given by its character ``offsets`` in ``text``). Tokens inside the first
    ``instruction_chars`` characters get FLAG_INSTRUCTION, or FLAG_INSTRUCTION_MATCHED when their
    word also occurs after the instruction; later tokens get FLAG_MATCH when their word occurs in
    the instruction, else FLAG_OTHER. Stop words and punctuation never match. Works for any
    tokenizer that reports offsets, sub-word ones included (a token takes its word's flag)."""
    wanted = {_normal(w) for w in split_words(instruction) if w not in _STOPWORDS and w.isalnum()}
    lowered = text.lower()
    word_at = [""] * (len(text) + 1)
    on_screen: set[str] = set()
    for match in _WORD.finditer(lowered):
        word = _normal(match.group(0))
        if match.start() >= instruction_chars:
            on_screen.add(word)
        for i in range(match.start(), match.end()):
            word_at[i] = word
    flags = []
    for start, end in offsets:
        word = word_at[start] if end > start else ""
        if start < instruction_chars and end > start:
            matched = word in wanted and word in on_screen
            flags.append(FLAG_INSTRUCTION_MATCHED if matched else FLAG_INSTRUCTION)
        else:
            flags.append(FLAG_MATCH if word in wanted else FLAG_OTHER)
    return flags


def shares_words(instruction: str, text: str) -> bool:
    """Whether ``text`` holds a word of the instruction (stop words and punctuation never count)."""
    wanted = {_normal(w) for w in split_words(instruction) if w not in _STOPWORDS and w.isalnum()}
    return any(_normal(w) in wanted for w in split_words(text))


def build_word_tokenizer(
    corpus: Iterable[str], *, min_count: int = 1, extra_words: Iterable[str] = ()
) -> PreTrainedTokenizerFast:
    """A word-level tokenizer over the corpus's words (plus 0..100 and ``extra_words``)."""
    counts = Counter(w for text in corpus for w in split_words(text))
    words = sorted(w for w, n in counts.items() if n >= min_count)
    words += [str(n) for n in range(101)] + [w.lower() for w in extra_words]
    vocab: dict[str, int] = {}
    for token in [*SPECIAL_TOKENS.values(), *words]:
        vocab.setdefault(token, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=SPECIAL_TOKENS["unk"]))
    core.normalizer = normalizers.Lowercase()
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex(WORD_PATTERN), behavior="isolated")]
    )
    core.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with spaces
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=core,
        pad_token=SPECIAL_TOKENS["pad"],
        unk_token=SPECIAL_TOKENS["unk"],
        bos_token=SPECIAL_TOKENS["bos"],
        eos_token=SPECIAL_TOKENS["eos"],
    )
