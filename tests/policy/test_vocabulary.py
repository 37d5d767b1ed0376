"""The default tokenizer's vocabulary files are SimDroid's corpus: the core reads them instead of
importing the simulator, and they must not drift from it."""

from __future__ import annotations

import pytest

from distrl_core.policy.vocabulary import CORPUS_SPLITS, vocabulary_path, vocabulary_words
from simulators.corpus import corpus_words


@pytest.mark.parametrize("split", CORPUS_SPLITS)
def test_each_vocabulary_file_holds_the_words_of_its_corpus(split):
    assert list(vocabulary_words(split)) == corpus_words(split), (
        f"{vocabulary_path(split)} is out of date: run `python -m simulators.corpus --write`"
    )


def test_an_unknown_split_is_refused_by_name():
    with pytest.raises(ValueError, match=r"vocabulary split must be one of .*'train'.*got 'tain'"):
        vocabulary_path("tain")
