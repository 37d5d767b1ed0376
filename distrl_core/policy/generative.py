"""Generative acting: the model writes the action text, which ``parse_action`` reads.

π is the model's next-token distribution with logits divided by the temperature (no top-k/top-p,
so the behaviour log-prob is exact). Sampling stops at EOS, at a token containing a newline, or at
``max_new_tokens``. The behaviour log-prob is the sum over emitted tokens (EOS included when it was
emitted) and the entropy is the true entropy of π summed over those positions. The learner
re-tokenizes the stored ``raw_output``; it appends EOS when the stored token count says it was
emitted. Where the emitted tokens are not what the tokenizer makes of their text (a sub-word or
byte-level model can spell a text in other pieces), act() stores the log-prob and token count of the
re-tokenized text instead (``_as_stored``), so act() and evaluate() always agree.

Vision-language bases (``PolicyConfig.vision``) read the screenshot through their AutoProcessor: the
prompt gets the processor's image placeholder (through its chat template when it has one) and the
image goes in as ``pixel_values``; the rest is the same.
"""

from __future__ import annotations

import inspect
import io
from collections.abc import Sequence
from typing import Any

import torch

from distrl_core.algos.entropy import token_entropy
from distrl_core.envs.actions import parse_action
from distrl_core.envs.observation import Observation
from distrl_core.policy.parts import ActingParts
from distrl_core.policy.prompt import generative_prompt, last_actions
from distrl_core.policy.types import ActOutput, StepInput

__all__ = ["act_generative", "evaluate_generative", "stop_ids"]


def stop_ids(tokenizer: Any) -> frozenset[int]:
    """EOS and every token whose text holds a newline (a scan of the vocabulary: the policy keeps
    the result, see ``Policy.generation_stops``)."""
    stops = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    vocab = tokenizer.get_vocab()
    stops |= {i for token, i in vocab.items() if "\n" in tokenizer.convert_tokens_to_string([token])}
    return frozenset(stops)


def _suppressed(parts: ActingParts) -> list[int]:
    # Special tokens other than EOS would vanish from the decoded text and break re-scoring.
    tokenizer = parts.tokenizer
    return sorted({i for i in tokenizer.all_special_ids if i != tokenizer.eos_token_id})


def _cache_argument(model: Any) -> str:
    """Transformers 5 renamed ``past_key_values`` to ``cache`` (argument and output field)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(type(base).forward).parameters else "past_key_values"


def _with_image(processor: Any, text: str) -> str:
    if getattr(processor, "chat_template", None):
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
        return str(processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))
    return f"{processor.image_token} {text}"


def _prompt_inputs(
    parts: ActingParts, instruction: str, ui_text: str, history: Sequence[str], screenshot: bytes | None
) -> dict[str, torch.Tensor]:
    """Model inputs of one prompt (batch of 1): input_ids, plus pixel_values etc. for vision."""
    text = generative_prompt(instruction, ui_text, last_actions(history, parts.config.history))
    if parts.processor is None:
        return {"input_ids": parts.tokenizer(text, return_tensors="pt")["input_ids"]}
    if screenshot is None:
        raise ValueError(
            "this vision policy needs the step's screenshot; run the environment with screenshots on "
            "(SimDroidEnvConfig(screenshots=True)) and keep screenshot_png in the stored rows"
        )
    from PIL import Image

    image = Image.open(io.BytesIO(screenshot)).convert("RGB")
    encoded = parts.processor(text=[_with_image(parts.processor, text)], images=[image], return_tensors="pt")
    return {key: value for key, value in encoded.items() if isinstance(value, torch.Tensor)}


def _stack(values: list[torch.Tensor], prompt_lengths: list[int], width: int) -> torch.Tensor:
    """One processor output of each step in one batch: per-token ones ((1, prompt length), such as
    Gemma 3's token_type_ids marking image tokens) right-padded with 0 to (N, width); the others
    (pixel_values of one image each, image grids) concatenated along their first dimension."""
    if all(v.dim() == 2 and v.shape == (1, n) for v, n in zip(values, prompt_lengths, strict=True)):
        return torch.cat([torch.nn.functional.pad(v, (0, width - v.shape[1])) for v in values])
    return torch.cat(values)


def _instruction_end(parts: ActingParts, ids: list[int], instruction: str, fallback: int) -> int:
    """Position of the instruction's last token (what the trajectory critic reads), found by
    searching its tokens in the prompt; ``fallback`` when a tokenizer merges it with its context."""
    needle = parts.tokenizer(f"task: {instruction}", add_special_tokens=False)["input_ids"]
    for start in range(len(ids) - len(needle) + 1):
        if ids[start : start + len(needle)] == needle:
            return start + len(needle) - 1
    return fallback


@torch.no_grad()
def act_generative(
    parts: ActingParts,
    observations: Sequence[Observation],
    *,
    greedy: bool,
    generator: torch.Generator,
    stops: frozenset[int],
) -> list[ActOutput]:
    """Sample (or, ``greedy``, take the argmax of) each observation's action text, token by token,
    until a token of ``stops`` (see ``stop_ids``) or ``max_new_tokens``."""
    tokenizer, device, temperature = parts.tokenizer, parts.device, parts.config.temperature
    suppressed = _suppressed(parts)
    cache_arg = _cache_argument(parts.model)
    outputs = []
    for observation in observations:  # one at a time: no padding, so log-probs match re-scoring
        inputs = _prompt_inputs(
            parts,
            observation.instruction,
            observation.ui_text,
            observation.previous_actions,
            observation.screenshot_png,
        )
        model_inputs = {key: value.to(device) for key, value in inputs.items()}
        emitted: list[int] = []
        logprob, entropy = 0.0, 0.0
        for _ in range(parts.config.max_new_tokens):
            out = parts.model(**model_inputs, use_cache=True)
            logits = out.logits[0, -1].float() / temperature
            if suppressed:
                logits[suppressed] = float("-inf")
            log_p = torch.log_softmax(logits, dim=-1)
            if greedy:
                token = int(log_p.argmax())
            else:
                token = int(torch.multinomial(log_p.exp().cpu(), 1, generator=generator))
            logprob += float(log_p[token])
            entropy += float(token_entropy(logits[None], torch.ones(1, device=logits.device)))
            emitted.append(token)
            if token in stops:
                break
            model_inputs = {
                "input_ids": torch.tensor([[token]], device=device),
                cache_arg: getattr(out, cache_arg),
            }
        text = tokenizer.decode(emitted, skip_special_tokens=True)
        outputs.append(
            ActOutput(
                raw_text=text,
                action=parse_action(text),
                logprob=logprob,
                token_count=len(emitted),
                entropy=entropy,
                value=0.0,
                extras={
                    "stopped": bool(emitted and emitted[-1] in stops),
                    "last": emitted[-1] if emitted else -1,
                },
            )
        )
    steps = [
        StepInput(
            o.instruction,
            o.ui_text,
            "",
            raw_output=out.raw_text,
            history=o.previous_actions,
            token_count=_canonical_count(tokenizer, out),
            screenshot_png=o.screenshot_png,
        )
        for o, out in zip(observations, outputs, strict=True)
    ]
    scored = evaluate_generative(parts, steps)
    values, rescored = scored["values"].tolist(), scored["logp"].tolist()
    return [
        _as_stored(o, step.token_count, float(v), float(logp))
        for o, step, v, logp in zip(outputs, steps, values, rescored, strict=True)
    ]


def _canonical_count(tokenizer: Any, out: ActOutput) -> int:
    """Tokens the learner will score for ``out``: its text re-tokenized, plus EOS when emitted."""
    count = len(tokenizer(out.raw_text, add_special_tokens=False)["input_ids"])
    return count + int(bool(out.extras["stopped"]) and out.extras["last"] == tokenizer.eos_token_id)


def _as_stored(out: ActOutput, canonical_count: int, value: float, rescored: float) -> ActOutput:
    """``out`` with its value, and with the log-prob the learner will compute for its text.

    A sub-word model can emit a text in tokens other than those its tokenizer makes of it (a word
    in two pieces where the tokenizer merges them; bytes of a character split by a byte-level BPE),
    and the learner re-tokenizes the stored text. Then the behaviour log-prob of the sampled tokens
    would not be the probability the learner rescores, and every importance ratio of that step
    would be off; the stored log-prob and token count are made those of the re-tokenized text
    (its probability along the tokenizer's path, a lower bound of the text's). A trained model
    emits its tokenizer's own splits; an untrained one (random weights) often does not.
    """
    extras = {key: v for key, v in out.extras.items() if key != "last"}
    if canonical_count == out.token_count and abs(rescored - out.logprob) < 1e-3:
        return ActOutput(out.raw_text, out.action, out.logprob, out.token_count, out.entropy, value, extras)
    extras["retokenized"] = True
    return ActOutput(out.raw_text, out.action, rescored, canonical_count, out.entropy, value, extras)


def evaluate_generative(
    parts: ActingParts, steps: Sequence[StepInput], *, with_actions: bool = True
) -> dict[str, torch.Tensor]:
    """Flat (N,) log π of each stored output (sum over its tokens), entropy, V(s), trajectory logit."""
    tokenizer, device = parts.tokenizer, parts.device
    sequences, prompt_lengths, instruction_ends, extras = [], [], [], []
    for step in steps:
        inputs = _prompt_inputs(
            parts, step.instruction, step.observation_text, step.history, step.screenshot_png
        )
        prompt_ids = inputs.pop("input_ids")[0].tolist()
        inputs.pop("attention_mask", None)
        extras.append(inputs)
        action_ids = tokenizer(step.raw_output, add_special_tokens=False)["input_ids"] if with_actions else []
        if with_actions and step.token_count > len(action_ids) and tokenizer.eos_token_id is not None:
            action_ids = [*action_ids, tokenizer.eos_token_id]
        sequences.append(prompt_ids + action_ids)
        prompt_lengths.append(len(prompt_ids))
        instruction_ends.append(_instruction_end(parts, prompt_ids, step.instruction, len(prompt_ids) - 1))
    width = max(len(s) for s in sequences)
    ids = torch.full((len(steps), width), tokenizer.pad_token_id or 0, dtype=torch.long)
    attention = torch.zeros_like(ids)
    for i, seq in enumerate(sequences):
        ids[i, : len(seq)] = torch.tensor(seq)
        attention[i, : len(seq)] = 1
    ids, attention = ids.to(device), attention.to(device)
    stacked = {key: _stack([e[key] for e in extras], prompt_lengths, width).to(device) for key in extras[0]}
    out = parts.model(input_ids=ids, attention_mask=attention, output_hidden_states=True, **stacked)
    logits = out.logits[:, :-1].float() / parts.config.temperature  # position t predicts token t+1
    suppressed = _suppressed(parts)
    if suppressed:
        logits[..., suppressed] = float("-inf")
    targets = ids[:, 1:]
    positions = torch.arange(width - 1, device=device)[None, :]
    lengths = attention.sum(dim=1)
    prompt = torch.tensor(prompt_lengths, device=device)
    action_mask = (positions >= (prompt - 1)[:, None]) & (positions < (lengths - 1)[:, None])
    token_logp = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    logp = torch.where(action_mask, token_logp, torch.zeros_like(token_logp)).sum(dim=1)
    entropy = token_entropy(logits, action_mask.float())
    hidden = out.hidden_states[-1].float()
    critic_hidden = parts.heads.critic_states(ids, None, attention, hidden, parts.config.critic)
    rows = torch.arange(len(steps), device=device)
    values = parts.heads.state_value(critic_hidden[rows, prompt - 1])
    traj = parts.heads.trajectory_logit(critic_hidden[rows, torch.tensor(instruction_ends, device=device)])
    return {
        "logp": logp,
        "entropy": entropy,
        "values": values,
        "traj_logits": traj,
        "known": torch.ones(len(steps), dtype=torch.bool, device=device),
    }
