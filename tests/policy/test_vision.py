"""The vision path: a tiny LLaVA built locally reads SimDroid screenshots through its AutoProcessor."""

from __future__ import annotations

import io

import pytest
import torch
from PIL import Image
from transformers import (
    CLIPImageProcessor,
    CLIPVisionConfig,
    LlamaConfig,
    LlavaConfig,
    LlavaForConditionalGeneration,
    LlavaProcessor,
)

from distrl_core.learner.batch import StepBatch
from distrl_core.policy import Policy, PolicyConfig, load_policy, save_policy
from distrl_core.policy.tokenizer import build_word_tokenizer
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from tests.policy.vision_rows import acted_rows


@pytest.fixture(scope="module")
def tiny_vlm_dir(tmp_path_factory, tokenizer):
    directory = tmp_path_factory.mktemp("tiny-llava")
    words = tokenizer.get_vocab()
    vlm_tokenizer = build_word_tokenizer(sorted(w for w in words if not w.startswith("[")))
    vlm_tokenizer.add_special_tokens({"additional_special_tokens": ["<image>"]})
    image_token = vlm_tokenizer.convert_tokens_to_ids("<image>")
    vision = CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=32,
        patch_size=16,
    )
    text = LlamaConfig(
        vocab_size=len(vlm_tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, pad_token_id=vlm_tokenizer.pad_token_id,
        bos_token_id=vlm_tokenizer.bos_token_id, eos_token_id=vlm_tokenizer.eos_token_id,
    )  # fmt: skip
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=image_token)
    torch.manual_seed(0)
    LlavaForConditionalGeneration(config).save_pretrained(directory)
    images = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    LlavaProcessor(
        image_processor=images,
        tokenizer=vlm_tokenizer,
        patch_size=16,
        num_additional_image_tokens=1,
        vision_feature_select_strategy="default",
    ).save_pretrained(directory)
    return directory


def test_vision_policy_acts_on_screenshots_and_rescoring_agrees(tiny_vlm_dir, tmp_path):
    policy = Policy.create(
        PolicyConfig(base=str(tiny_vlm_dir), mode="generative", vision=True, max_new_tokens=4, device="cpu")
    )
    env = SimDroidEnv(SimDroidEnvConfig(screenshots=True))
    observations = [env.reset(f"general-train-{i:04d}", seed=i) for i in (0, 50)]
    outputs = policy.act(observations)
    rows = acted_rows(observations, outputs)
    batch = StepBatch.from_rows(rows)
    scored = policy.evaluate(batch)
    assert torch.allclose(scored.logp[:, 0].detach(), batch.logp_mu[:, 0], atol=1e-4)

    # the image matters: another screenshot changes the log-probabilities
    other = io.BytesIO()
    Image.new("RGB", (270, 600), (200, 30, 30)).save(other, format="PNG")
    swapped = [dict(rows[0], screenshot_png=other.getvalue()), rows[1]]
    changed = policy.evaluate(StepBatch.from_rows(swapped)).logp[0, 0]
    assert abs(changed.item() - scored.logp[0, 0].item()) > 1e-5  # float noise is ~1e-7

    save_policy(policy, tmp_path / "v1")
    loaded = load_policy(tmp_path / "v1")
    assert loaded.processor is not None
    assert torch.allclose(loaded.evaluate(batch).logp, scored.logp, atol=1e-5)


def test_vision_without_screenshots_says_how_to_fix(tiny_vlm_dir):
    policy = Policy.create(PolicyConfig(base=str(tiny_vlm_dir), mode="generative", vision=True, device="cpu"))
    observation = SimDroidEnv(SimDroidEnvConfig(screenshots=False)).reset("general-train-0000")
    with pytest.raises(ValueError, match="screenshots=True"):
        policy.act([observation])
