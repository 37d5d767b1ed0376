"""Local Hugging Face judge plumbing, with tiny random models built from configs (nothing downloaded).

A random model cannot judge; these tests check the prompt that reaches it, the generation cap,
text-only vs vision routing, and that its gibberish is read as ``unknown``.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest
import torch
import transformers
from PIL import Image
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from distrl_core.evaluators.base import EpisodeContext, Verdict
from distrl_core.evaluators.judge import JudgeConfig, ModelJudge
from distrl_core.evaluators.judge_local import LocalJudgeBackend, LocalJudgeConfig
from distrl_core.evaluators.judge_parse import parse_judge_answer

END, IMAGE = "<|end|>", "<image>"
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>"
    "{% if m['content'] is string %}{{ m['content'] }}"
    "{% else %}{% for c in m['content'] %}{% if c['type'] == 'image' %}<image>{% else %}{{ c['text'] }}"
    "{% endif %}{% endfor %}{% endif %}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def byte_tokenizer(extra: list[str]) -> transformers.PreTrainedTokenizerFast:
    """Byte-level tokenizer with no merges: needs no training and covers any text."""
    vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    for token in extra:
        vocab[token] = len(vocab)
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(extra)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=END, pad_token=END)


@pytest.fixture(scope="module")
def text_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tiny-text-judge")
    tokenizer = byte_tokenizer([END])
    end_id = tokenizer.convert_tokens_to_ids(END)
    config = transformers.GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=1024,
        n_embd=32,
        n_layer=2,
        n_head=2,
        bos_token_id=end_id,
        eos_token_id=end_id,
    )
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def vlm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tiny-vlm-judge")
    tokenizer = byte_tokenizer([END, IMAGE])
    tokenizer.image_token = IMAGE
    end_id, image_id = tokenizer.convert_tokens_to_ids([END, IMAGE])
    vision = transformers.CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=32,
        patch_size=8,
    )
    text = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=end_id,
        eos_token_id=end_id,
        pad_token_id=end_id,
    )
    config = transformers.LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_id=image_id,
        vision_feature_select_strategy="default",
    )
    torch.manual_seed(0)
    transformers.LlavaForConditionalGeneration(config).save_pretrained(path)
    image_processor = transformers.CLIPImageProcessor(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
    )
    processor = transformers.LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=CHAT_TEMPLATE,
    )
    processor.save_pretrained(path)
    return path


def screenshot() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (27, 60), (30, 120, 200)).save(buffer, format="PNG")
    return buffer.getvalue()


CONTEXT = EpisodeContext(
    instruction="Set an alarm for 7am",
    screenshots=(screenshot(),),
    actions=("open_app(Clock)", "tap(4)"),
    ui_text="[0] Alarm 7:00 AM switch on",
)


def test_text_model_reads_ui_text_and_generation_is_capped(text_model_dir: Path) -> None:
    backend = LocalJudgeBackend(LocalJudgeConfig(text_model_dir, max_new_tokens=6, max_input_tokens=900))
    assert not backend.uses_images
    result = ModelJudge(backend).evaluate(CONTEXT)
    call = backend.last_call
    assert call is not None
    assert call.images == 0
    for expected in ("Set an alarm for 7am", "tap(4)", "[0] Alarm 7:00 AM switch on", "Status:"):
        assert expected in call.prompt_text
    assert 1 <= call.new_tokens <= 6
    # random weights produce gibberish, which must read as unknown, never success
    assert result.verdict is parse_judge_answer(call.answer).verdict is Verdict.UNKNOWN
    assert result.source == f"judge:local:{text_model_dir.name}"


def test_greedy_decoding_is_repeatable(text_model_dir: Path) -> None:
    backend = LocalJudgeBackend(LocalJudgeConfig(text_model_dir, max_new_tokens=5, max_input_tokens=900))
    judge = ModelJudge(backend, JudgeConfig(skip_unchanged=False))
    judge.evaluate(CONTEXT)
    first = backend.last_call
    judge.evaluate(CONTEXT)
    assert backend.last_call == first


def test_long_prompt_keeps_its_last_tokens(text_model_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    backend = LocalJudgeBackend(LocalJudgeConfig(text_model_dir, max_new_tokens=2, max_input_tokens=64))
    with caplog.at_level(logging.WARNING):
        ModelJudge(backend).evaluate(CONTEXT)
    assert backend.last_call is not None and backend.last_call.prompt_tokens == 64
    assert "max_input_tokens" in caplog.text


def test_vision_model_gets_the_screenshot(vlm_dir: Path) -> None:
    backend = LocalJudgeBackend(LocalJudgeConfig(vlm_dir, max_new_tokens=4))
    assert backend.uses_images
    result = ModelJudge(backend).evaluate(CONTEXT)
    call = backend.last_call
    assert call is not None
    assert call.images == 1
    assert call.prompt_text.count(IMAGE) == 1  # one placeholder in the rendered chat template
    assert "Set an alarm for 7am" in call.prompt_text
    assert "[0] Alarm 7:00 AM" not in call.prompt_text  # the image stands in for the UI text
    # byte-level tokens, with the one placeholder expanded to the (32/8)^2 = 16 patch features
    assert call.prompt_tokens == len(call.prompt_text.encode()) - len(IMAGE) + 16
    assert 1 <= call.new_tokens <= 4
    assert result.verdict is Verdict.UNKNOWN


def test_vision_model_can_be_forced_text_only(vlm_dir: Path) -> None:
    backend = LocalJudgeBackend(LocalJudgeConfig(vlm_dir, max_new_tokens=3, use_images=False))
    assert not backend.uses_images
    ModelJudge(backend).evaluate(CONTEXT)
    call = backend.last_call
    assert call is not None and call.images == 0
    assert IMAGE not in call.prompt_text
    assert "[0] Alarm 7:00 AM switch on" in call.prompt_text


def test_config_errors_name_the_fix(tmp_path: Path, text_model_dir: Path) -> None:
    with pytest.raises(ValueError, match="save_pretrained"):
        LocalJudgeConfig(tmp_path / "missing")
    with pytest.raises(ValueError, match="max_new_tokens"):
        LocalJudgeConfig(text_model_dir, max_new_tokens=0)
    with pytest.raises(ValueError, match="dtype"):
        LocalJudgeConfig(text_model_dir, dtype="fp8")
    with pytest.raises(ValueError, match="text-only model"):
        LocalJudgeBackend(LocalJudgeConfig(text_model_dir, use_images=True))
