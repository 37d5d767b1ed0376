"""Tiny random-weight vision-language folders of real architectures, built here (nothing downloaded).

Each folder is what ``save_pretrained`` writes for the real model class (Gemma 3, or Idefics3, the
SmolVLM architecture) with its real processor, so ``AutoProcessor`` + ``AutoModelForImageTextToText``
load it as they load the released checkpoints; only the sizes are tiny (hidden 32, one layer, a
32-pixel image side) and the weights random. The tokenizer is a byte-level BPE trained here on the
SimDroid task texts, screens and action texts, with the special tokens each processor needs; it
splits any text (no unknown words), as the released tokenizers do. The tests build their VLM bases
with it and ``bench/gpu_pretrained.sh`` smoke-checks on one:

    python -m bench.tiny_vlm --family gemma3 --out /tmp/tiny-gemma3

Qwen2-VL and Qwen2.5-VL are not among them: transformers 5 builds their processor with a video
processor, which needs torchvision, and this project's environment has none (torch CPU only).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

__all__ = ["FAMILIES", "corpus", "train_tokenizer", "write_tiny_vlm"]

FAMILIES = ("gemma3", "idefics3")
HIDDEN = 32
IMAGE_SIDE = 32

# The chat templates of the released models, cut to one user turn holding images and text (what
# the policy's prompt uses) and the assistant's turn that follows.
_GEMMA_TEMPLATE = (
    "<bos>{% for message in messages %}<start_of_turn>{{ 'model' if message['role'] == 'assistant' "
    "else message['role'] }}\n{% for part in message['content'] %}{% if part['type'] == 'image' %}"
    "<start_of_image>{% else %}{{ part['text'] }}{% endif %}{% endfor %}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
_IDEFICS_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{ message['role'] | capitalize }}:"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<image>"
    "{% else %}{{ part['text'] }}{% endif %}{% endfor %}<end_of_utterance>\n{% endfor %}"
    "{% if add_generation_prompt %}Assistant:{% endif %}"
)
_SPECIALS = {
    "gemma3": [
        "<pad>",
        "<bos>",
        "<eos>",
        "<start_of_turn>",
        "<end_of_turn>",
        "<start_of_image>",
        "<end_of_image>",
        "<image_soft_token>",
    ],
    "idefics3": [
        "<|endoftext|>",
        "<|im_start|>",
        "<end_of_utterance>",
        "<fake_token_around_image>",
        "<image>",
        "<global-img>",
        *(f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)),
    ],
}


def corpus(tasks: int = 140) -> Iterator[str]:
    """Texts the tokenizer is trained on: task instructions, the prompts' screens (compact UI text
    of each task's first screen) and the expert's action texts, from SimDroid's General train tasks."""
    from distrl_core.envs.actions import format_action
    from distrl_core.policy.prompt import generative_prompt
    from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
    from simulators.simdroid.expert import expert_action
    from simulators.simdroid.tasks import load_tasks

    env = SimDroidEnv(SimDroidEnvConfig(screenshots=False, ui_xml=False))
    for task in load_tasks("general", "train")[:tasks]:
        observation = env.reset(task, seed=0)
        yield generative_prompt(task.instruction, observation.ui_text, ())
        yield format_action(expert_action(env, task))
    yield "tap(0) swipe(up) swipe(down) swipe(left) swipe(right) key(HOME) key(BACK) key(ENTER) "
    yield 'type("0123456789") status(complete) long_press(1) User: Assistant: user assistant'


def train_tokenizer(family: str, texts: list[str], vocab_size: int = 600) -> Any:
    """A byte-level BPE (as Qwen2's and SmolLM2's) trained on ``texts``, as a fast HF tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = _SPECIALS[family]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer)
    if family == "gemma3":  # the turn's end closes an answer, as in the released chat models
        named = {"eos_token": "<end_of_turn>", "pad_token": "<pad>", "bos_token": "<bos>"}
        # Gemma3Processor reads these three as tokenizer attributes
        extra = {
            "boi_token": "<start_of_image>",
            "eoi_token": "<end_of_image>",
            "image_token": "<image_soft_token>",
        }
    else:
        named = {"eos_token": "<end_of_utterance>", "pad_token": "<|endoftext|>", "bos_token": "<|im_start|>"}
        extra = {}
    others = [t for t in specials if t not in named.values() and t not in extra.values()]
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, **named, unk_token=None, extra_special_tokens=extra or None
    )
    tokenizer.add_special_tokens({"additional_special_tokens": others})
    return tokenizer


def _text_sizes(tokenizer: Any) -> dict[str, Any]:
    return {
        "vocab_size": len(tokenizer),
        "hidden_size": HIDDEN,
        "intermediate_size": 2 * HIDDEN,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "max_position_embeddings": 1024,
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }


def _gemma3(tokenizer: Any) -> tuple[Any, Any]:
    from transformers import (
        Gemma3Config,
        Gemma3ForConditionalGeneration,
        Gemma3ImageProcessorPil,
        Gemma3Processor,
    )

    ids = tokenizer.convert_tokens_to_ids
    text = _text_sizes(tokenizer) | {
        "head_dim": HIDDEN // 2, "query_pre_attn_scalar": HIDDEN // 2, "sliding_window": 64,
        "layer_types": ["full_attention"],
    }  # fmt: skip
    config = Gemma3Config(
        text_config=text,
        vision_config={
            "hidden_size": HIDDEN, "intermediate_size": 2 * HIDDEN, "num_hidden_layers": 1,
            "num_attention_heads": 2, "image_size": IMAGE_SIDE, "patch_size": 8,
        },
        mm_tokens_per_image=4,  # the 4x4 patches average-pooled to 2x2
        boi_token_index=ids("<start_of_image>"), eoi_token_index=ids("<end_of_image>"),
        image_token_index=ids("<image_soft_token>"),
    )  # fmt: skip
    images = Gemma3ImageProcessorPil(size={"height": IMAGE_SIDE, "width": IMAGE_SIDE})
    processor = Gemma3Processor(
        image_processor=images, tokenizer=tokenizer, chat_template=_GEMMA_TEMPLATE, image_seq_length=4
    )
    return Gemma3ForConditionalGeneration(config), processor


def _idefics3(tokenizer: Any) -> tuple[Any, Any]:
    from transformers import (
        Idefics3Config,
        Idefics3ForConditionalGeneration,
        Idefics3ImageProcessorPil,
        Idefics3Processor,
    )

    patch, scale = 8, 2
    config = Idefics3Config(
        text_config={"model_type": "llama", **_text_sizes(tokenizer)},
        vision_config={
            "hidden_size": HIDDEN, "intermediate_size": 2 * HIDDEN, "num_hidden_layers": 1,
            "num_attention_heads": 2, "image_size": IMAGE_SIDE, "patch_size": patch,
        },
        scale_factor=scale, image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
    )  # fmt: skip
    images = Idefics3ImageProcessorPil(
        size={"longest_edge": IMAGE_SIDE},
        max_image_size={"longest_edge": IMAGE_SIDE},
        do_image_splitting=False,  # one global image: the policy stacks one per step
    )
    processor = Idefics3Processor(
        image_processor=images,
        tokenizer=tokenizer,
        image_seq_len=(IMAGE_SIDE // patch) ** 2 // scale**2,  # tokens per image after pixel shuffle
        chat_template=_IDEFICS_TEMPLATE,
    )
    return Idefics3ForConditionalGeneration(config), processor


def write_tiny_vlm(family: str, directory: Path, *, seed: int = 0, tasks: int = 140) -> Path:
    """A tiny random ``family`` model with its processor and locally trained tokenizer at ``directory``."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    tokenizer = train_tokenizer(family, list(corpus(tasks)))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model, processor = (_gemma3 if family == "gemma3" else _idefics3)(tokenizer)
    directory = Path(directory)
    model.save_pretrained(directory)
    processor.save_pretrained(directory)
    return directory


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--family", choices=FAMILIES, default="gemma3")
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(write_tiny_vlm(args.family, Path(args.out), seed=args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
