"""Judge backend that runs a Hugging Face model from a local directory (no hub access).

A vision-language model (its config has a ``vision_config``) is loaded with ``AutoProcessor`` +
``AutoModelForImageTextToText`` and sees the screenshots; any other model is loaded with ``AutoTokenizer``
+ ``AutoModelForCausalLM`` and reads the compact UI text instead. Decoding is greedy with a short cap,
since the verdict is one line and an unsure model otherwise rambles to the limit.
"""

from __future__ import annotations

import io
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrl_core.evaluators.judge_prompt import JudgePrompt

log = logging.getLogger(__name__)

_DTYPES = ("auto", "float32", "bfloat16", "float16")


@dataclass(frozen=True)
class LocalJudgeConfig:
    """Settings of the local Hugging Face judge.

    model_path: local directory written by ``save_pretrained`` (model + tokenizer or processor).
    max_new_tokens: cap on generated tokens; the answer format needs a few dozen at most.
    max_input_tokens: a longer text-only prompt keeps its last tokens (the answer format comes last);
        keep ``JudgeConfig.ui_text_max_chars`` modest so the task line is not the part cut.
    device: torch device for the model, e.g. ``"cpu"``, ``"cuda"``, ``"cuda:1"``.
    dtype: weights dtype: ``"auto"`` (as saved), ``"float32"``, ``"bfloat16"`` or ``"float16"``.
    use_images: None decides from the model (vision-language -> images); False forces text-only
        prompts even for a VLM; True on a text-only model is an error.
    """

    model_path: str | os.PathLike[str]
    max_new_tokens: int = 48
    max_input_tokens: int = 2048
    device: str = "cpu"
    dtype: str = "auto"
    use_images: bool | None = None

    def __post_init__(self) -> None:
        path = Path(self.model_path)
        if not (path / "config.json").is_file():
            raise ValueError(
                f"LocalJudgeConfig.model_path {str(path)!r} has no config.json: point it at a directory "
                "written by save_pretrained (hub names are not fetched; download the model beforehand)."
            )
        if self.max_new_tokens < 1:
            raise ValueError(f"LocalJudgeConfig.max_new_tokens must be >= 1 (got {self.max_new_tokens}).")
        if self.max_input_tokens < 16:
            raise ValueError(
                f"LocalJudgeConfig.max_input_tokens must be >= 16 (got {self.max_input_tokens})."
            )
        if self.dtype not in _DTYPES:
            raise ValueError(f"LocalJudgeConfig.dtype must be one of {_DTYPES} (got {self.dtype!r}).")


@dataclass(frozen=True)
class LocalJudgeCall:
    """What the last call did, for logs and tests: the rendered prompt and the token counts."""

    prompt_text: str
    prompt_tokens: int
    new_tokens: int
    answer: str
    images: int


def _is_vision_language(config: Any) -> bool:
    return getattr(config, "vision_config", None) is not None


class LocalJudgeBackend:
    """Runs the judge prompt through a local model. Loading happens in the constructor."""

    def __init__(self, config: LocalJudgeConfig) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a stray hub lookup would hang, then fail
        import torch
        from transformers import AutoConfig

        self.config = config
        self.last_call: LocalJudgeCall | None = None
        path = str(config.model_path)
        model_config = AutoConfig.from_pretrained(path, local_files_only=True)
        is_vlm = _is_vision_language(model_config)
        if config.use_images and not is_vlm:
            raise ValueError(
                f"LocalJudgeConfig.use_images=True but {path!r} is a text-only model: use a vision-language "
                "model or leave use_images unset."
            )
        self._vision = is_vlm and config.use_images is not False
        dtype = "auto" if config.dtype == "auto" else getattr(torch, config.dtype)
        if is_vlm:
            from transformers import AutoModelForImageTextToText, AutoProcessor

            self._processor: Any = AutoProcessor.from_pretrained(path, local_files_only=True)  # type: ignore[no-untyped-call]
            self._tokenizer: Any = self._processor.tokenizer
            self._model: Any = AutoModelForImageTextToText.from_pretrained(
                path, local_files_only=True, dtype=dtype
            )
        else:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            self._processor = None
            self._tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
            self._model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=dtype)
        self._model.to(config.device)
        self._model.eval()

    @property
    def name(self) -> str:
        return f"local:{Path(self.config.model_path).name}"

    @property
    def uses_images(self) -> bool:
        return self._vision

    def __repr__(self) -> str:
        return f"LocalJudgeBackend(model_path={str(self.config.model_path)!r}, vision={self._vision})"

    def _render(self, prompt: JudgePrompt) -> str:
        """The prompt as the model's chat template renders it (plain text when it has none)."""
        template_owner = self._processor if self._processor is not None else self._tokenizer
        if getattr(template_owner, "chat_template", None):
            user_content: Any = prompt.user_text
            if self._vision:
                user_content = [{"type": "image"} for _ in prompt.images] + [
                    {"type": "text", "text": prompt.user_text}
                ]
            messages = [
                {"role": "system", "content": prompt.system},
                {"role": "user", "content": user_content},
            ]
            return str(
                template_owner.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            )
        return f"{prompt.system}\n\n{prompt.user_text}\n"

    def _encode(self, text: str, prompt: JudgePrompt) -> dict[str, Any]:
        if self._vision and prompt.images:
            from PIL import Image

            images = [Image.open(io.BytesIO(png)).convert("RGB") for png in prompt.images]
            # Truncating a VLM prompt could cut image placeholder tokens, so it is encoded whole.
            return dict(self._processor(text=[text], images=images, return_tensors="pt"))
        encoded = dict(self._tokenizer(text, return_tensors="pt", add_special_tokens=False))
        if encoded["input_ids"].shape[1] > self.config.max_input_tokens:
            log.warning(
                "judge prompt of %d tokens cut to its last %d (LocalJudgeConfig.max_input_tokens)",
                encoded["input_ids"].shape[1],
                self.config.max_input_tokens,
            )
            encoded = {k: v[:, -self.config.max_input_tokens :] for k, v in encoded.items()}
        return encoded

    def complete(self, prompt: JudgePrompt) -> str:
        import torch

        if not self._vision:
            prompt = JudgePrompt(prompt.system, prompt.user_text, ())
        text = self._render(prompt)
        inputs = {k: v.to(self.config.device) for k, v in self._encode(text, prompt).items()}
        prompt_length = inputs["input_ids"].shape[1]
        tokenizer = self._tokenizer
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        with torch.inference_mode():
            output = self._model.generate(
                **inputs,
                max_new_tokens=self.config.max_new_tokens,
                do_sample=False,
                pad_token_id=pad_id if pad_id is not None else 0,
            )
        new_tokens = output[0, prompt_length:]
        answer = str(tokenizer.decode(new_tokens, skip_special_tokens=True))
        self.last_call = LocalJudgeCall(
            text, prompt_length, int(new_tokens.shape[0]), answer, len(prompt.images)
        )
        return answer
