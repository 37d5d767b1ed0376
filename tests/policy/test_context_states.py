"""The contextual states of a frozen encoder (SubwordSettings.context_states, base "tiny-minilm-ctx"):
the assembly equals a plain loop and falls back to zero rows where a segment does not align, the
prompt's ids are its segments' own tokenizations (the small encoder's and MiniLM's), the cache serves
what a fresh pass computes, holds its byte bound and never outlives its encoder, a zero projection
scores exactly as the plain sub-word policy, versions round-trip and refuse another encoder, and an
update trains the projection without running the trunk on what it has read."""

from __future__ import annotations

import pytest
import torch

from distrl_core.learner.batch import StepBatch
from distrl_core.policy import BaseMismatchError, Policy, PolicyConfig, load_policy, save_policy
from distrl_core.policy.config import SubwordSettings, TinyModelConfig, policy_config_for
from distrl_core.policy.context_states import ContextCache, assemble_states, context_cache, prompt_states
from distrl_core.policy.prompt import SEPARATOR
from distrl_core.policy.types import StepInput
from tests.policy.subword_encoder import (
    SMALL_TINY_SETTINGS,
    WIDTH,
    small_subword_config,
    steps_of,
    write_small_encoder,
)

SMALL_TINY = TinyModelConfig(**SMALL_TINY_SETTINGS)


def _config(folder, context: bool = True, **options) -> PolicyConfig:
    return small_subword_config(folder, context_states=context, **options)


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory):
    return write_small_encoder(tmp_path_factory.mktemp("context") / "small", seed=0)


_steps = steps_of


def test_assembly_places_aligned_segments_and_zeroes_the_rest():
    generator = torch.Generator().manual_seed(0)
    prompt = [5, 6, 7, 1, 8, 9, 1, 4, 4]
    first_states, second_states = (
        torch.randn(3, 4, generator=generator),
        torch.randn(2, 4, generator=generator),
    )
    segments = [
        (0, 3, (5, 6, 7), first_states),  # aligned
        (4, 6, (8, 9), second_states),  # aligned
        (7, 9, (4, 3), torch.ones(2, 4)),  # its own ids differ from the prompt's: not placed
    ]
    out, unaligned = assemble_states(len(prompt), 4, prompt, segments)
    expected = torch.zeros(len(prompt), 4)
    for first, end, ids, states in segments:
        if list(ids) == prompt[first:end]:
            for offset in range(end - first):
                expected[first + offset] = states[offset]
    assert torch.equal(out, expected) and unaligned == 2
    assert torch.equal(out[3], torch.zeros(4)) and torch.equal(out[6], torch.zeros(4))  # the separators
    # A segment the trunk could not read whole (no states) falls back too.
    out, unaligned = assemble_states(3, 4, [5, 6, 7], [(0, 3, (5, 6, 7), torch.zeros(0, 4))])
    assert torch.equal(out, torch.zeros(3, 4)) and unaligned == 3


def _check_alignment(policy: Policy, rows) -> None:
    """The prompt's ids are each segment's own tokenization, separated by the separator's tokens."""
    separator = policy.tokenizer(SEPARATOR.strip(), add_special_tokens=False)["input_ids"]
    for row in rows:
        step = policy.encode(row["instruction"], row["observation_text"])
        rebuilt: list[int] = []
        for first, end, text in step.segments:
            if rebuilt:
                rebuilt += separator
            assert len(rebuilt) == first
            own = policy.tokenizer(text, add_special_tokens=False)["input_ids"]
            assert list(step.input_ids[first:end]) == own
            rebuilt += own
        assert rebuilt == list(step.input_ids)


def test_segments_align_with_the_prompt_and_every_token_gets_its_state(encoder_dir, sim_rows):
    policy = Policy.create(_config(encoder_dir))
    _check_alignment(policy, sim_rows[:8])
    cache = ContextCache()
    row = sim_rows[0]
    step = policy.encode(row["instruction"], row["observation_text"])
    states = prompt_states(str(encoder_dir), step.input_ids, step.segments, cache)  # (L, E)
    assert states.shape == (len(step.input_ids), WIDTH) and cache.unaligned == 0
    inside = {i for first, end, _ in step.segments for i in range(first, end)}
    for i in range(len(step.input_ids)):  # a segment's tokens have states, the separators none
        assert (states[i].abs().sum() > 0) == (i in inside)
    first, end, text = step.segments[1]
    _, alone = cache.compute(str(encoder_dir), text)
    torch.testing.assert_close(states[first:end], alone, atol=1e-5, rtol=0)


def test_minilm_segments_align_with_the_prompt(minilm_dir, sim_rows):
    policy = Policy.create(
        PolicyConfig(device="cpu", subwords=SubwordSettings(str(minilm_dir), context_states=True))
    )
    assert policy.heads.context is not None and policy.heads.context.weight.shape == (64, 384)
    _check_alignment(policy, sim_rows)
    cache = ContextCache()
    for row in sim_rows:
        step = policy.encode(row["instruction"], row["observation_text"])
        prompt_states(str(minilm_dir), step.input_ids, step.segments, cache)
    assert cache.unaligned == 0 and cache.computed > 0


def test_the_cache_serves_what_a_fresh_pass_computes_holds_its_bound_and_follows_its_encoder(tmp_path):
    folder = write_small_encoder(tmp_path / "enc", seed=0)
    texts = ["task : open the camera", "TextView Camera", "TextView Photos"]
    sizes = [len(ContextCache().compute(str(folder), t)[0]) for t in texts]
    row_bytes = WIDTH * 4  # float32
    cache = ContextCache(max_bytes=row_bytes * (sizes[0] + sizes[1] + sizes[2]))
    _, first = cache.states(str(folder), texts)
    assert cache.computed == 3 and cache.bytes == row_bytes * sum(sizes)
    for text, (ids, states) in zip(texts, first, strict=True):
        fresh_ids, fresh = cache.compute(str(folder), text)
        assert ids == fresh_ids and states.dtype == torch.float32
        torch.testing.assert_close(states, fresh, atol=1e-5, rtol=0)
    _, again = cache.states(str(folder), list(reversed(texts)))
    assert cache.computed == 3  # all served from the cache
    assert all(a[1] is b[1] for a, b in zip(again, reversed(first), strict=True))
    cache.states(str(folder), ["TextView Gmail"])  # over the bound: the least recently used go
    assert cache.bytes <= cache.max_bytes and len(cache) < 4
    cache.states(str(folder), ["task : open the camera"])  # used last before Gmail: kept
    assert cache.computed == 4
    write_small_encoder(folder, seed=1)  # other weights in the same folder
    _, changed = cache.states(str(folder), texts[:1])
    assert cache.computed == 5 and len(cache) == 1  # the old encoder's entries are gone
    assert not torch.allclose(changed[0][1], first[0][1], atol=1e-3)
    with pytest.raises(ValueError, match="max_bytes"):
        ContextCache(max_bytes=0)


def test_a_zero_projection_scores_exactly_as_the_plain_sub_word_policy(encoder_dir, sim_rows):
    plain = Policy.create(_config(encoder_dir, context=False)).eval()
    context = Policy.create(_config(encoder_dir)).eval()
    assert plain.heads.context is None and not any("context" in k for k in plain.heads.state_dict())
    heads = {k: v for k, v in context.heads.state_dict().items() if not k.startswith("context")}
    assert heads.keys() == plain.heads.state_dict().keys()
    assert all(torch.equal(v, plain.heads.state_dict()[k]) for k, v in heads.items())
    assert torch.equal(context.heads.context.weight, torch.zeros(16, WIDTH))
    steps = _steps(sim_rows)
    ours, theirs = context.evaluate_steps(steps), plain.evaluate_steps(steps)
    for name, value in theirs.items():
        assert torch.equal(ours[name], value), name
    assert plain.encode(steps[0].instruction, steps[0].observation_text).segments  # always recorded


def test_a_version_round_trips_and_refuses_another_encoder(tmp_path, sim_rows):
    folder = write_small_encoder(tmp_path / "enc", seed=0)
    policy = Policy.create(_config(folder))
    with torch.no_grad():  # saved weights that differ from a fresh build, the projection's too
        for parameter in [*policy.model.parameters(), *policy.heads.parameters()]:
            if parameter.requires_grad:
                parameter.add_(0.05 * torch.randn_like(parameter))
    save_policy(policy, tmp_path / "v1")
    loaded = load_policy(tmp_path / "v1", device="cpu")
    assert loaded.config.subwords is not None and loaded.config.subwords.context_states
    assert torch.equal(loaded.heads.context.weight, policy.heads.context.weight)
    batch = StepBatch.from_rows(sim_rows)
    assert torch.equal(policy.evaluate(batch).logp, loaded.evaluate(batch).logp)
    assert Policy.create(_config(folder, context=False)).base.hash != policy.base.hash
    from safetensors.torch import load_file, save_file

    weights = load_file(folder / "model.safetensors")  # a trunk layer changes, the word pieces do not
    layer = next(name for name in weights if "layer.0" in name and name.endswith("weight"))
    weights[layer] = weights[layer] + 0.1
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(BaseMismatchError, match="contextual states"):
        load_policy(tmp_path / "v1", device="cpu")


def test_acting_and_re_scoring_agree_and_an_update_trains_the_projection(encoder_dir, episode_rows):
    from distrl_core.learner import Learner, LearnerConfig
    from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
    from simulators.simdroid.tasks import load_tasks
    from simulators.warm_start import WarmStartConfig, supervised_warm_start

    policy = Policy.create(_config(encoder_dir))
    history = supervised_warm_start(policy, episode_rows, WarmStartConfig(updates=3, batch_size=4))
    assert len(history) == 3
    assert policy.heads.context.weight.abs().sum() > 0  # the zero map moved
    env = SimDroidEnv(SimDroidEnvConfig(screenshots=False))
    observations = [env.reset(task, seed=0) for task in load_tasks("general", "train")[:40:8]]
    acted = policy.act(observations, greedy=True)
    context_cache().clear()  # a learner in another process: a cold cache, the trunk loaded again
    learner = Policy.create(_config(encoder_dir))
    learner.load_state_dict(policy.state_dict())
    taken = [
        StepInput(o.instruction, o.ui_text, out.raw_text) for o, out in zip(observations, acted, strict=True)
    ]
    logp = learner.eval().evaluate_steps(taken)["logp"]
    torch.testing.assert_close(logp, torch.tensor([out.logprob for out in acted]), atol=1e-5, rtol=0)
    update = Learner(learner, LearnerConfig(seed=0, critic_warmup_updates=0))
    batch = StepBatch.from_rows(episode_rows)
    update.update(batch)
    read = context_cache().computed
    before = learner.heads.context.weight.detach().clone()
    update.update(batch)
    assert context_cache().computed == read  # the second update's segments were all cached
    assert not torch.equal(learner.heads.context.weight.detach(), before)


def test_tiny_minilm_ctx_is_chosen_as_bases_are(encoder_dir, monkeypatch):
    from distrl_core.policy import pretrained
    from flows.train_local_params import TrainLocalParams

    prepared = pretrained.ConvertedModel(encoder_dir, encoder_dir, False, 0)
    monkeypatch.setitem(pretrained.PACKAGED_BASES, "minilm", lambda: prepared)
    config = policy_config_for("tiny-minilm-ctx", 3, "fit_unseen")
    assert config.subwords is not None and config.subwords.context_states and config.base is None
    assert not config.subwords.semantic_match
    assert PolicyConfig.from_dict(config.to_dict()) == config
    old = policy_config_for("tiny-minilm", 3)
    assert old.subwords is not None and not old.subwords.context_states
    assert TrainLocalParams(base="tiny-minilm-ctx").base == "tiny-minilm-ctx"


def test_the_distillation_prefix_reads_the_whole_prompts_states(encoder_dir, sim_rows):
    from distrl_core.policy.distill import instruction_states
    from distrl_core.policy.scoring import context_rows, hidden_states, pad_rows

    policy = Policy.create(_config(encoder_dir)).eval()
    with torch.no_grad():
        policy.heads.context.weight.normal_(std=0.05)  # a map that moves the states
    encoded = [policy.encode(r["instruction"], r["observation_text"]) for r in sim_rows[:6]]
    parts = policy.parts()
    with torch.no_grad():
        prefix = instruction_states(parts, encoded)  # (B, D)
        ids = pad_rows([e.input_ids for e in encoded], policy.tokenizer.pad_token_id, parts.device)
        flags = pad_rows([e.flags for e in encoded], 0, parts.device)
        lengths = torch.tensor([len(e.input_ids) for e in encoded])
        attention = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).long()
        whole = hidden_states(parts, ids, flags, attention, None, context_rows(parts, encoded))  # (B, L, D)
        static = hidden_states(parts, ids, flags, attention)  # without the states
    for b, e in enumerate(encoded):
        torch.testing.assert_close(
            prefix[b], whole[b, : e.instruction_end + 1].mean(dim=0), atol=1e-5, rtol=0
        )
    assert not torch.allclose(whole, static, atol=1e-4)


def test_a_dropped_word_loses_its_state_with_its_embedding(encoder_dir, sim_rows):
    from distrl_core.policy.scoring import context_rows, hidden_states, pad_rows

    policy = Policy.create(_config(encoder_dir))
    with torch.no_grad():
        policy.heads.context.weight.normal_(std=0.05)
    encoded = [policy.encode(r["instruction"], r["observation_text"]) for r in sim_rows[:3]]
    policy.train()
    with policy.with_word_dropout(1.0, 1.0, 1.0), torch.no_grad():  # every word dropped
        parts = policy.parts()
        ids = pad_rows([e.input_ids for e in encoded], policy.tokenizer.pad_token_id, parts.device)
        flags = pad_rows([e.flags for e in encoded], 0, parts.device)
        attention = torch.ones_like(ids)
        read = hidden_states(parts, ids, flags, attention, None, context_rows(parts, encoded))
        unread = hidden_states(parts, ids, flags, attention)
    torch.testing.assert_close(read, unread, atol=0, rtol=0)


def test_segment_context_dropout_drops_every_state_of_a_segment_with_a_dropped_word():
    from distrl_core.policy.scoring import _context_drop

    drop = torch.tensor([[False, True, False, False, False, False, True], [False] * 7])
    segments = torch.tensor([[1, 1, 1, 0, 2, 2, 0], [1, 1, 0, 2, 2, 2, 0]])  # 0: separator or padding
    expected = drop.clone()
    for n in range(2):
        dropped = {int(segments[n, i]) for i in range(7) if drop[n, i] and segments[n, i] > 0}
        for i in range(7):
            expected[n, i] |= int(segments[n, i]) in dropped
    assert torch.equal(_context_drop(drop, segments), expected)
    assert expected[0].tolist() == [True, True, True, False, False, False, True]
    assert torch.equal(_context_drop(drop, None), drop)


def test_tiny_minilm_ctx_seg_drops_whole_segments(encoder_dir, monkeypatch, sim_rows):
    from distrl_core.policy import pretrained

    prepared = pretrained.ConvertedModel(encoder_dir, encoder_dir, False, 0)
    monkeypatch.setitem(pretrained.PACKAGED_BASES, "minilm", lambda: prepared)
    config = policy_config_for("tiny-minilm-ctx-seg", 1, "fit_unseen", device="cpu")
    assert config.subwords is not None and config.subwords.context_states
    assert config.subwords.context_dropout == "segment"
    assert policy_config_for("tiny-minilm-ctx").subwords.context_dropout == "token"
    with pytest.raises(ValueError, match="context_dropout"):
        PolicyConfig(subwords=SubwordSettings(str(encoder_dir), context_states=True, context_dropout="word"))
    config.tiny = SMALL_TINY
    policy = Policy.create(config)
    with torch.no_grad():
        policy.heads.context.weight.normal_(std=0.05)
    steps = _steps(sim_rows, 4)
    policy.train()
    with policy.with_word_dropout(0.5, 0.1):  # a training pass runs, with gradients into the map
        torch.manual_seed(0)
        loss = -policy.evaluate_steps(steps)["logp"].clamp(min=-30).sum()
        loss.backward()
    assert policy.heads.context.weight.grad is not None


def _decoder_inputs(policy: Policy, steps: list[StepInput]) -> torch.Tensor:
    """The (N, L, D) inputs the decoder body receives when ``policy`` scores ``steps``."""
    from distrl_core.policy.backbone import hf

    captured: list[torch.Tensor] = []
    decoder = hf(policy.model).get_decoder()
    hook = decoder.register_forward_pre_hook(
        lambda _m, _a, kwargs: captured.append(kwargs["inputs_embeds"].detach().clone()), with_kwargs=True
    )
    try:
        policy.evaluate_steps(steps)
    finally:
        hook.remove()
    return captured[0]


def test_the_context_scale_multiplies_the_projected_states(encoder_dir, monkeypatch, sim_rows):
    """The states add ``context_scale`` times the projection's output to the inputs and nothing else:
    with equal weights, (inputs at scale 0.25 - inputs without states) = 0.25 x (inputs at scale 1 -
    inputs without states). Base "tiny-minilm-ctx-small" sets 0.1; 0 or less is refused."""
    from distrl_core.policy import pretrained

    prepared = pretrained.ConvertedModel(encoder_dir, encoder_dir, False, 0)
    monkeypatch.setitem(pretrained.PACKAGED_BASES, "minilm", lambda: prepared)
    small = policy_config_for("tiny-minilm-ctx-small", 3, "fit_unseen")
    assert (
        small.subwords is not None and small.subwords.context_scale == 0.1 and small.subwords.context_states
    )
    assert PolicyConfig.from_dict(small.to_dict()) == small
    with pytest.raises(ValueError, match="context_scale must be > 0"):
        SubwordSettings(source=str(encoder_dir), context_states=True, context_scale=0.0).validate()

    steps = _steps(sim_rows, 3)
    weight = torch.randn(16, WIDTH, generator=torch.Generator().manual_seed(1))
    inputs = {}
    for scale in (1.0, 0.25):
        subwords = SubwordSettings(source=str(encoder_dir), context_states=True, context_scale=scale)
        policy = Policy.create(PolicyConfig(device="cpu", tiny=SMALL_TINY, subwords=subwords, seed=5)).eval()
        inputs["none"] = _decoder_inputs(policy, steps)  # the projection is zero at first
        with torch.no_grad():
            policy.heads.context.weight.copy_(weight)
        inputs[scale] = _decoder_inputs(policy, steps)
    added_one, added_quarter = inputs[1.0] - inputs["none"], inputs[0.25] - inputs["none"]
    assert added_one.abs().max() > 1e-3  # the states do reach the inputs
    torch.testing.assert_close(added_quarter, 0.25 * added_one, rtol=1e-5, atol=1e-6)
