"""The warm start's distillation (policy.distill, WarmStartConfig.distill_weight): cached sentence
targets equal recomputed ones and never outlive their encoder, the cache stays bounded, the tiny
model's instruction states equal the whole prompt's, and the loss falls as the warm start trains."""

from __future__ import annotations

import pytest
import torch

from distrl_core.policy import Policy, PolicyConfig
from distrl_core.policy.config import SubwordSettings, TinyModelConfig
from distrl_core.policy.distill import SentenceTargets, instruction_states, mean_pool
from distrl_core.policy.scoring import hidden_states, pad_rows
from tests.policy.subword_encoder import write_small_encoder

TEXTS = ["Open the Photos app", "Turn on Wi-Fi", "Set an alarm at 7:15 AM", "Search for pizza", "Open Clock"]


def _small_policy(folder) -> Policy:
    tiny = TinyModelConfig(hidden_size=16, num_heads=2, intermediate_size=32)
    return Policy.create(PolicyConfig(device="cpu", tiny=tiny, subwords=SubwordSettings(source=str(folder))))


def test_mean_pool_equals_a_loop():
    states = torch.randn(3, 5, 4)
    mask = torch.tensor([[1, 1, 0, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=torch.bool)
    pooled = mean_pool(states, mask)
    for b in range(3):
        rows = [states[b, t] for t in range(5) if mask[b, t]]
        assert torch.allclose(pooled[b], sum(rows) / len(rows), atol=1e-6)


def test_cached_targets_equal_recomputed_ones_and_the_cache_is_bounded(tmp_path):
    folder = write_small_encoder(tmp_path / "enc", seed=0)
    targets = SentenceTargets(str(folder), max_entries=3)
    batched = targets(TEXTS)  # computed padded, in one batch
    assert len(targets) == 3  # bounded: the two least recently used were evicted
    for text, row in zip(TEXTS, batched, strict=True):
        alone = targets.compute([text])[0]  # no padding, no cache
        assert torch.allclose(row, alone, atol=1e-5), text
        assert float(row.norm()) == pytest.approx(1.0, abs=1e-5)
    assert torch.equal(targets(TEXTS[-3:]), batched[-3:])  # served from the cache, unchanged


def test_a_changed_encoder_empties_the_target_cache(tmp_path):
    folder = write_small_encoder(tmp_path / "enc", seed=0)
    targets = SentenceTargets(str(folder))
    before = targets(TEXTS)
    write_small_encoder(folder, seed=1)  # other weights in the same folder
    after = targets(TEXTS)
    assert not torch.allclose(before, after, atol=1e-3)
    assert torch.allclose(after, SentenceTargets(str(folder)).compute(TEXTS), atol=1e-5)


def test_minilm_targets_match_recomputed_and_keep_meaning(minilm_dir):
    targets = SentenceTargets(str(minilm_dir))
    texts = ["Open the Photos app", "Could you bring up the gallery of pictures", "Set an alarm at 7:15 AM"]
    cached = targets(texts)
    for text, row in zip(texts, cached, strict=True):
        assert torch.allclose(row, targets.compute([text])[0], atol=1e-5), text
    assert float(cached[0] @ cached[1]) > float(cached[0] @ cached[2]) + 0.1


def test_instruction_states_equal_the_whole_prompts_states(tmp_path, sim_rows):
    policy = _small_policy(write_small_encoder(tmp_path / "enc", seed=0)).eval()
    encoded = [policy.encode(r["instruction"], r["observation_text"]) for r in sim_rows[:6]]
    parts = policy.parts()
    with torch.no_grad():
        prefix = instruction_states(parts, encoded)
        ids = pad_rows([e.input_ids for e in encoded], policy.tokenizer.pad_token_id, parts.device)
        flags = pad_rows([e.flags for e in encoded], 0, parts.device)
        lengths = torch.tensor([len(e.input_ids) for e in encoded])
        attention = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).long()
        whole = hidden_states(parts, ids, flags, attention)  # (B, L, D), the full prompts
    for b, e in enumerate(encoded):
        assert torch.allclose(prefix[b], whole[b, : e.instruction_end + 1].mean(dim=0), atol=1e-5)


def test_the_warm_start_distils_and_refuses_a_policy_without_sub_words(tmp_path, episode_rows, make_policy):
    from simulators.warm_start import WarmStartConfig, supervised_warm_start

    policy = _small_policy(write_small_encoder(tmp_path / "enc", seed=0))
    config = WarmStartConfig(
        updates=25, batch_size=4, distill_weight=1.0, entity_dropout=0.0, word_dropout=0.0
    )
    history = supervised_warm_start(policy, episode_rows, config)
    first, last = history[0]["distill"], history[-1]["distill"]
    assert last < first - 0.05, (first, last)
    with pytest.raises(ValueError, match="sub-words"):
        supervised_warm_start(make_policy(), episode_rows, config)
