"""Base-dependent training settings: parameter groups, warm-start gradient accumulation, the
cached base hash. On a LoRA-adapted local base (the tiny model saved as a checkpoint) so that
they run in seconds; tests/policy/test_pretrained.py repeats the key ones on SmolLM2."""

from __future__ import annotations

import os

import pytest
import torch

from distrl_core.learner import Learner, LearnerConfig
from distrl_core.learner.config import DEFAULT_MICRO_BATCH_SIZE
from distrl_core.policy import LoraSettings, Policy, PolicyConfig, save_policy
from distrl_core.policy.backbone import hash_checkpoint_files
from distrl_core.policy.defaults import PRETRAINED, describe_defaults, training_defaults
from simulators.warm_start import (
    WarmStartConfig,
    _sft_backward,
    _sft_backward_accumulated,
    micro_batches,
    warm_start_optimizer,
)


@pytest.fixture
def lora_policy(make_policy, tokenizer, tmp_path, monkeypatch) -> Policy:
    monkeypatch.setenv("DISTRL_HASH_CACHE", str(tmp_path / "hashes.json"))
    base = tmp_path / "base"
    make_policy().model.save_pretrained(base)
    tokenizer.save_pretrained(base)
    return Policy.create(PolicyConfig(base=str(base), lora=LoraSettings(r=4, alpha=8), device="cpu"))


def test_tiny_default_keeps_one_group_and_whole_batch_updates(make_policy):
    policy = make_policy()
    assert training_defaults(policy.config).micro_batch_size is None
    optimizer = warm_start_optimizer(policy, WarmStartConfig())
    assert [g["lr"] for g in optimizer.param_groups] == [1e-3]
    learner = Learner(policy, LearnerConfig())
    assert [g["lr"] for g in learner.actor_optimizer.param_groups] == [LearnerConfig().actor_lr]
    assert learner.micro_batch_size == DEFAULT_MICRO_BATCH_SIZE


def test_pretrained_base_gets_an_adapter_group_and_micro_batches(lora_policy):
    optimizer = warm_start_optimizer(lora_policy, WarmStartConfig())
    groups = {g["name"]: g for g in optimizer.param_groups}
    assert groups["backbone"]["lr"] == PRETRAINED.backbone_lr and groups["heads"]["lr"] == 1e-3
    assert all("lora" in n for n, p in lora_policy.model.named_parameters() if p.requires_grad)
    assert {id(p) for p in groups["heads"]["params"]} == {id(p) for p in lora_policy.heads.actor_parameters()}
    learner = Learner(lora_policy, LearnerConfig(actor_lr=5e-4))
    lrs = {g["name"]: g["lr"] for g in learner.actor_optimizer.param_groups}
    assert lrs == {"backbone": PRETRAINED.learner_backbone_lr, "heads": 5e-4}
    assert learner.micro_batch_size == PRETRAINED.micro_batch_size
    # An explicit value is honoured, the tiny default's 16 included.
    for explicit in (8, DEFAULT_MICRO_BATCH_SIZE):
        assert Learner(lora_policy, LearnerConfig(micro_batch_size=explicit)).micro_batch_size == explicit
    assert "backbone_lr=0.0002" in describe_defaults(lora_policy.config)


def test_a_configured_backbone_rate_overrides_the_bases_default(lora_policy, make_policy):
    learner = Learner(lora_policy, LearnerConfig(actor_lr=5e-4, backbone_lr=3e-4))
    lrs = {g["name"]: g["lr"] for g in learner.actor_optimizer.param_groups}
    assert lrs == {"backbone": 3e-4, "heads": 5e-4}
    # On the tiny model the decoder gets the rate apart from the heads, every actor weight once.
    tiny = make_policy()
    groups = {
        g["name"]: g for g in Learner(tiny, LearnerConfig(backbone_lr=1e-4)).actor_optimizer.param_groups
    }
    assert groups["backbone"]["lr"] == 1e-4 and groups["heads"]["lr"] == LearnerConfig().actor_lr
    trained = [id(p) for g in groups.values() for p in g["params"]]
    assert sorted(trained) == sorted(id(p) for p in tiny.actor_parameters())


@pytest.mark.parametrize(
    ("value", "problem"), [(0.0, "must be > 0 or null"), ("fast", "a finite number or null")]
)
def test_a_bad_backbone_rate_is_refused_by_name(value, problem):
    with pytest.raises(ValueError, match=f"backbone_lr .*{problem}"):
        LearnerConfig(backbone_lr=value).validate()


def test_accumulated_warm_start_gradient_equals_the_whole_batch_one(make_policy, episode_rows):
    by_episode: dict[str, list] = {}
    for row in episode_rows:
        by_episode.setdefault(row["episode_id"], []).append(row)
    trajectories = list(by_episode.values())
    assert len(micro_batches(make_policy(), trajectories, 3, None)) == 3
    assert len(micro_batches(make_policy(), trajectories, 100, 1)) == len(trajectories)

    def gradients(accumulate: bool) -> list[torch.Tensor]:
        policy = make_policy().train()  # no word dropout: both passes see the same inputs
        if accumulate:
            metrics = _sft_backward_accumulated(policy, trajectories, 3, 2000)
        else:
            metrics = _sft_backward(policy, [r for rows in trajectories for r in rows])
        return [p.grad.clone() for p in policy.actor_parameters() if p.grad is not None], metrics

    whole, whole_metrics = gradients(False)
    parts, part_metrics = gradients(True)
    assert len(whole) == len(parts)
    assert all(torch.allclose(a, b, atol=1e-6, rtol=1e-4) for a, b in zip(whole, parts, strict=True))
    assert part_metrics == pytest.approx(whole_metrics, rel=1e-5)


def test_base_hash_is_cached_by_file_size_and_mtime(lora_policy, tmp_path):
    base = tmp_path / "base"
    first = lora_policy.base.hash
    weights = base / "model.safetensors"
    stat = weights.stat()
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # same size; mtime restored below: the cache must not reread the file
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert hash_checkpoint_files(base) == first
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert hash_checkpoint_files(base) != first
    (tmp_path / "hashes.json").unlink()
    save_policy(lora_policy, tmp_path / "v")
    assert "mtime" in (tmp_path / "v" / "base.json").read_text()
