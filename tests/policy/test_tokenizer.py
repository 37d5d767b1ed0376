"""The local word tokenizer: words tokenize alike everywhere, reload offline, match flags."""

from __future__ import annotations

from transformers import AutoTokenizer

from distrl_core.policy.tokenizer import (
    FLAG_INSTRUCTION,
    FLAG_INSTRUCTION_MATCHED,
    FLAG_MATCH,
    FLAG_OTHER,
    build_word_tokenizer,
    match_flags,
)


def test_a_word_is_one_token_in_the_instruction_and_in_a_label(tokenizer):
    instruction = tokenizer("Open the Calculator app", add_special_tokens=False)["input_ids"]
    label = tokenizer('tap TextView "Calculator"', add_special_tokens=False)["input_ids"]
    calculator = tokenizer.convert_tokens_to_ids("calculator")
    assert calculator != tokenizer.unk_token_id
    assert calculator in instruction and calculator in label


def test_unknown_words_map_to_unk_and_the_tokenizer_reloads(tmp_path):
    tokenizer = build_word_tokenizer(["turn on wi-fi", "tap switch"])
    ids = tokenizer("turn on zanzibar", add_special_tokens=False)["input_ids"]
    assert ids[-1] == tokenizer.unk_token_id
    tokenizer.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    assert reloaded("turn on wi-fi 42")["input_ids"] == tokenizer("turn on wi-fi 42")["input_ids"]


def test_match_flags_mark_shared_words(tokenizer):
    instruction = "task : Turn on Wi-Fi at 7:30"
    text = instruction + ' | tap Switch "Wi-Fi" off | TextView "07:30 alarm" | key BACK'
    encoding = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    tokens = tokenizer.convert_ids_to_tokens(encoding["input_ids"])
    flags = match_flags(text, encoding["offset_mapping"], instruction, len(instruction))
    by_token = list(zip(tokens, flags, strict=True))
    first_on_screen = len(tokenizer(instruction, add_special_tokens=False)["input_ids"])
    assert ("wi", FLAG_INSTRUCTION_MATCHED) in by_token[:first_on_screen]
    assert ("turn", FLAG_INSTRUCTION) in by_token[:first_on_screen]
    screen = by_token[first_on_screen:]
    assert ("wi", FLAG_MATCH) in screen and ("07", FLAG_MATCH) in screen  # "07" and "7" are one number
    assert ("off", FLAG_OTHER) in screen and ("back", FLAG_OTHER) in screen
    assert ("-", FLAG_OTHER) in screen  # punctuation never matches
