"""The semantic match feature (SubwordSettings.semantic_match, base "tiny-minilm-sem"): the pure
functions equal plain loops, the tokens of each screen element get its similarity's index, the
embedding cache serves what a fresh pass computes, never outlives its encoder and holds its bound,
acting and re-scoring read the same feature, versions round-trip, a warm start and an update run,
and without the feature the policy is what it was."""

from __future__ import annotations

import math

import pytest
import torch

from distrl_core.learner.batch import StepBatch
from distrl_core.policy import BaseMismatchError, Policy, PolicyConfig, load_policy, save_policy
from distrl_core.policy.candidates import parse_compact_tree
from distrl_core.policy.config import TinyModelConfig, policy_config_for
from distrl_core.policy.semantic_match import (
    BIN_EDGES,
    BINS,
    INDICES,
    NEUTRAL,
    EmbeddingCache,
    cosine_similarities,
    embedding_cache,
    semantic_indices,
    similarity_indices,
)
from distrl_core.policy.types import StepInput
from tests.policy.subword_encoder import (
    SMALL_TINY_SETTINGS,
    small_subword_config,
    steps_of,
    write_small_encoder,
)

SMALL_TINY = TinyModelConfig(**SMALL_TINY_SETTINGS)


def _config(folder, semantic: bool = True, **options) -> PolicyConfig:
    return small_subword_config(folder, semantic_match=semantic, **options)


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory):
    return write_small_encoder(tmp_path_factory.mktemp("semantic") / "small", seed=0)


_steps = steps_of


def _reference_index(similarities: list[float], k: int) -> int:
    bin_ = 0
    for edge in BIN_EDGES:
        if similarities[k] >= edge:
            bin_ += 1
    best = all(similarities[k] >= other for other in similarities)
    return 1 + bin_ + (BINS if best else 0)


def test_the_pure_functions_equal_plain_loops():
    generator = torch.Generator().manual_seed(0)
    query, rows = torch.randn(24, generator=generator), torch.randn(9, 24, generator=generator)
    rows[3] = query * 2.5  # the most similar, at cosine 1
    similarities = cosine_similarities(query, rows)
    for k in range(9):
        dot = sum(float(a) * float(b) for a, b in zip(query, rows[k], strict=True))
        norms = math.sqrt(sum(float(a) ** 2 for a in query)) * math.sqrt(sum(float(b) ** 2 for b in rows[k]))
        assert float(similarities[k]) == pytest.approx(dot / norms, abs=1e-6)
    values = [-0.3, 0.05, 0.1, 0.19, 0.45, 0.7, 0.69, 0.7]  # edges fall in the upper bin; a tie for best
    indices = similarity_indices(torch.tensor(values))
    assert indices.tolist() == [_reference_index(values, k) for k in range(len(values))]
    assert indices.tolist()[-1] == indices.tolist()[-3] == 1 + 7 + BINS and max(indices) < INDICES
    assert similarity_indices(torch.zeros(0)).tolist() == []
    spans = [(2, 4), (5, 6), (8, 11)]
    tokens = semantic_indices(12, spans, torch.tensor([3, 9, 16]))
    expected = [NEUTRAL] * 12
    for (first, end), index in zip(spans, [3, 9, 16], strict=True):
        for position in range(first, end):
            expected[position] = index
    assert list(tokens) == expected


def test_each_element_s_tokens_carry_its_label_s_similarity(encoder_dir, sim_rows):
    policy = Policy.create(_config(encoder_dir))
    cache = embedding_cache()
    for row in sim_rows[:6]:
        step = policy.encode(row["instruction"], row["observation_text"])
        assert step.semantic is not None and len(step.semantic) == len(step.input_ids)
        labels = [line.label.strip() for line in parse_compact_tree(row["observation_text"])]
        assert {label for _, _, label in step.elements} == {label for label in labels if label}
        instruction = cache.compute(str(encoder_dir), [row["instruction"]])[0]
        similarities = [
            float(cosine_similarities(instruction, cache.compute(str(encoder_dir), [label]))[0])
            for _, _, label in step.elements
        ]
        inside = set()
        for k, (first, end, label) in enumerate(step.elements):
            words = policy.tokenizer.decode(list(step.input_ids[first:end]))
            assert label.lower().split()[0].strip(".,'") in words.lower() or "[UNK]" in words
            assert set(step.semantic[first:end]) == {_reference_index(similarities, k)}
            inside.update(range(first, end))
        assert all(step.semantic[i] == NEUTRAL for i in range(len(step.input_ids)) if i not in inside)
        assert all(step.semantic[i] == NEUTRAL for i in range(step.instruction_end + 1))


def test_the_cache_serves_what_a_fresh_pass_computes_and_holds_its_bound(tmp_path):
    folder = write_small_encoder(tmp_path / "enc", seed=0)
    cache = EmbeddingCache(max_entries=3)
    texts = ["open the camera", "Camera", "Photos"]
    first = cache.embed(str(folder), texts)
    assert first.shape == (3, 72) and cache.computed == 3
    again = cache.embed(str(folder), list(reversed(texts)))
    assert cache.computed == 3  # all from the cache
    torch.testing.assert_close(again, first.flip(0), atol=0, rtol=0)
    torch.testing.assert_close(first, cache.compute(str(folder), texts), atol=1e-5, rtol=0)
    torch.testing.assert_close(first.norm(dim=-1), torch.ones(3), atol=1e-5, rtol=0)
    cache.embed(str(folder), ["Gmail", "Chrome"])  # two more: the two least recently used go
    assert len(cache) == 3
    cache.embed(str(folder), ["open the camera"])  # used last before the two: still there
    assert cache.computed == 5
    cache.embed(str(folder), ["Photos"])  # used first: evicted, computed again
    assert cache.computed == 6 and len(cache) == 3
    write_small_encoder(folder, seed=1)  # other weights in the same folder
    changed = cache.embed(str(folder), texts)
    assert cache.computed == 9  # nothing served from the old encoder
    torch.testing.assert_close(changed, cache.compute(str(folder), texts), atol=1e-5, rtol=0)
    assert not torch.allclose(changed, first, atol=1e-3)
    with pytest.raises(ValueError, match="max_entries"):
        EmbeddingCache(max_entries=0)


def test_acting_and_re_scoring_read_the_same_feature(encoder_dir):
    from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
    from simulators.simdroid.tasks import load_tasks

    env = SimDroidEnv(SimDroidEnvConfig(screenshots=False))
    observations = [env.reset(task, seed=0) for task in load_tasks("general", "train")[:40:5]]
    actor = Policy.create(_config(encoder_dir))
    acted = actor.act(observations, greedy=True)
    # what a stored row keeps of each step: its instruction and observation text
    steps = [StepInput(o.instruction, o.ui_text, "") for o in observations]
    at_act = [actor.encode(s.instruction, s.observation_text) for s in steps]
    embedding_cache().clear()  # a learner in another process: a cold cache, the encoder loaded again
    learner = Policy.create(_config(encoder_dir))
    learner.load_state_dict(actor.state_dict())
    at_learn = [learner.encode(s.instruction, s.observation_text) for s in steps]
    assert [e.semantic for e in at_act] == [e.semantic for e in at_learn]
    assert any(index != NEUTRAL for e in at_learn for index in e.semantic or ())
    taken = [
        StepInput(s.instruction, s.observation_text, out.raw_text)
        for s, out in zip(steps, acted, strict=True)
    ]
    logp = learner.eval().evaluate_steps(taken)["logp"]
    torch.testing.assert_close(logp, torch.tensor([out.logprob for out in acted]), atol=1e-5, rtol=0)


def test_a_version_round_trips_and_refuses_another_encoder(tmp_path, sim_rows):
    folder = write_small_encoder(tmp_path / "enc", seed=0)
    policy = Policy.create(_config(folder))
    assert policy.heads.semantic is not None
    with torch.no_grad():  # saved weights that differ from a fresh build
        for parameter in [*policy.model.parameters(), *policy.heads.parameters()]:
            if parameter.requires_grad:
                parameter.add_(0.05 * torch.randn_like(parameter))
    save_policy(policy, tmp_path / "v1")
    loaded = load_policy(tmp_path / "v1", device="cpu")
    assert loaded.config.subwords is not None and loaded.config.subwords.semantic_match
    batch = StepBatch.from_rows(sim_rows)
    assert torch.equal(policy.evaluate(batch).logp, loaded.evaluate(batch).logp)
    plain = Policy.create(_config(folder, semantic=False))
    assert plain.base.hash != policy.base.hash  # the whole encoder's hash is in the semantic base's
    # The encoder's layers change, its word-piece table (all a plain sub-word base hashes) does not.
    from safetensors.torch import load_file, save_file

    weights = load_file(folder / "model.safetensors")
    layer = next(name for name in weights if "layer.0" in name and name.endswith("weight"))
    weights[layer] = weights[layer] + 0.1
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    assert Policy.create(_config(folder, semantic=False)).base.hash == plain.base.hash
    with pytest.raises(BaseMismatchError, match="sub-words"):
        load_policy(tmp_path / "v1", device="cpu")


def test_a_warm_start_and_a_learner_update_run_and_train_the_feature(encoder_dir, episode_rows):
    from distrl_core.learner import Learner, LearnerConfig
    from simulators.warm_start import WarmStartConfig, supervised_warm_start

    policy = Policy.create(_config(encoder_dir))
    before = policy.heads.semantic.weight.detach().clone()
    history = supervised_warm_start(policy, episode_rows, WarmStartConfig(updates=3, batch_size=4))
    assert len(history) == 3 and all(math.isfinite(h["nll"]) for h in history if "nll" in h)
    after_warm = policy.heads.semantic.weight.detach().clone()
    assert not torch.equal(before, after_warm)
    assert torch.equal(after_warm[NEUTRAL], torch.zeros(16))
    learner = Learner(policy, LearnerConfig(seed=0, critic_warmup_updates=0))
    learner.update(StepBatch.from_rows(episode_rows))
    assert not torch.equal(policy.heads.semantic.weight.detach(), after_warm)


def test_the_separate_critic_reads_the_feature_too(encoder_dir, sim_rows):
    policy = Policy.create(_config(encoder_dir, critic="separate"))
    assert policy.heads.critic_semantic is not None
    assert any(p is policy.heads.critic_semantic.weight for p in policy.critic_parameters())
    values = policy.evaluate_steps(_steps(sim_rows))["values"]
    with torch.no_grad():
        policy.heads.critic_semantic.weight.mul_(50.0)
    assert not torch.allclose(policy.evaluate_steps(_steps(sim_rows))["values"], values)


def test_without_the_feature_the_policy_is_what_it_was(encoder_dir, sim_rows):
    plain = Policy.create(_config(encoder_dir, semantic=False))
    assert plain.heads.semantic is None and plain.heads.critic_semantic is None
    assert not any("semantic" in name for name in plain.heads.state_dict())
    assert plain.encode(sim_rows[0]["instruction"], sim_rows[0]["observation_text"]).semantic is None
    semantic = Policy.create(_config(encoder_dir))
    # Every other weight draws what it drew without the feature ...
    heads = {k: v for k, v in semantic.heads.state_dict().items() if "semantic" not in k}
    assert heads.keys() == plain.heads.state_dict().keys()
    assert all(torch.equal(v, plain.heads.state_dict()[k]) for k, v in heads.items())
    model = plain.model.state_dict()
    assert all(torch.equal(v, model[k]) for k, v in semantic.model.state_dict().items())
    # ... and with its embedding at zero, the scores are bit for bit the plain policy's.
    with torch.no_grad():
        semantic.heads.semantic.weight.zero_()
    steps = _steps(sim_rows)
    for name, value in plain.eval().evaluate_steps(steps).items():
        assert torch.equal(value, semantic.eval().evaluate_steps(steps)[name]), name


def test_tiny_minilm_sem_is_chosen_as_bases_are(encoder_dir, monkeypatch):
    from distrl_core.policy import pretrained
    from flows.train_local_params import TrainLocalParams
    from ops.cli import _parse

    prepared = pretrained.ConvertedModel(encoder_dir, encoder_dir, False, 0)
    monkeypatch.setitem(pretrained.PACKAGED_BASES, "minilm", lambda: prepared)
    args = _parse(["demo", "--base", "tiny-minilm-sem", "--seed", "3"])
    assert args.options.build(args).base == "tiny-minilm-sem"
    config = policy_config_for("tiny-minilm-sem", 3, "fit_unseen")
    assert config.subwords is not None and config.subwords.semantic_match and config.base is None
    assert PolicyConfig.from_dict(config.to_dict()) == config
    old = policy_config_for("tiny-minilm", 3)
    assert old.subwords is not None and not old.subwords.semantic_match
    assert TrainLocalParams(base="tiny-minilm-sem").base == "tiny-minilm-sem"
    with pytest.raises(ValueError, match="encoder_layers"):
        policy_config_for("tiny-minilm-sem", encoder_layers=1)
