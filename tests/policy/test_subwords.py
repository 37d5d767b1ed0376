"""The tiny model on a pretrained encoder's sub-words (PolicyConfig.subwords, base "tiny-minilm"):
the projected table equals a plain PCA, it is cached per base and never outlives a base change,
unseen words become known sub-words, versions round-trip, and an update leaves the table alone."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from distrl_core.learner.batch import StepBatch
from distrl_core.policy import BaseMismatchError, Policy, PolicyConfig, load_policy, save_policy
from distrl_core.policy.config import SubwordSettings, TinyModelConfig, policy_config_for
from distrl_core.policy.subwords import (
    principal_projection,
    read_word_embeddings,
    scaled_to_std,
    subword_table,
)
from tests.policy.subword_encoder import write_small_encoder

SMALL_TINY = TinyModelConfig(hidden_size=16, num_heads=2, intermediate_size=32)


def _reference_pca(matrix: np.ndarray, components: int) -> np.ndarray:
    """PCA written out: the mean and the covariance summed row by row, numpy's eigh, axes sorted by
    eigenvalue and signed so their largest-magnitude coordinate is positive."""
    rows, width = matrix.shape
    mean = np.zeros(width)
    for row in matrix:
        mean += row
    mean /= rows
    covariance = np.zeros((width, width))
    for row in matrix:
        centred = row - mean
        covariance += np.outer(centred, centred)
    covariance /= rows - 1
    values, vectors = np.linalg.eigh(covariance)
    order = np.argsort(values)[::-1][:components]
    axes = vectors[:, order]
    for k in range(components):
        if axes[np.argmax(np.abs(axes[:, k])), k] < 0:
            axes[:, k] = -axes[:, k]
    return (matrix - mean) @ axes


def _small_config(folder, **subwords) -> PolicyConfig:
    return PolicyConfig(
        device="cpu", tiny=SMALL_TINY, subwords=SubwordSettings(source=str(folder), **subwords)
    )


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory):
    return write_small_encoder(tmp_path_factory.mktemp("encoder") / "small", seed=0)


def test_the_projection_equals_a_pca_written_out():
    generator = np.random.default_rng(0)
    # distinct spreads per column, so every principal axis is well defined
    matrix = generator.normal(size=(300, 12)) * np.linspace(3.0, 0.2, 12) + generator.normal(size=12)
    matrix = matrix @ np.linalg.qr(generator.normal(size=(12, 12)))[0]  # axes not the coordinate ones
    projected = principal_projection(torch.tensor(matrix, dtype=torch.float32), 5).numpy()
    reference = _reference_pca(matrix.astype(np.float32).astype(np.float64), 5)
    np.testing.assert_allclose(projected, reference, atol=1e-5)
    scaled = scaled_to_std(torch.tensor(projected), 0.02)
    assert float(scaled.std()) == pytest.approx(0.02, rel=1e-6)
    with pytest.raises(ValueError, match="hidden_size"):
        principal_projection(torch.tensor(matrix), 13)


def test_the_projection_is_the_same_to_the_last_bit_whatever_torchs_thread_count():
    """A version's base hash covers the table's bytes: a one-thread demo's version must load in a
    command run with the machine's default threads."""
    matrix = torch.randn(4000, 384, generator=torch.Generator().manual_seed(0))
    before = torch.get_num_threads()
    try:
        tables = []
        for threads in (1, 2, 4):
            torch.set_num_threads(threads)
            tables.append(principal_projection(matrix, 64).to(torch.float32))
            assert torch.get_num_threads() == threads  # the caller's setting is given back
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(tables[0], table) for table in tables[1:])


def test_the_minilm_table_equals_a_numpy_pca_of_its_embeddings(minilm_dir):
    settings = SubwordSettings(source=str(minilm_dir))
    table = subword_table(settings, 64)  # (30522, 64)
    matrix = read_word_embeddings(minilm_dir).double().numpy()
    centred = matrix - matrix.mean(axis=0)
    values, vectors = np.linalg.eigh(centred.T @ centred / (len(matrix) - 1))
    axes = vectors[:, np.argsort(values)[::-1][:64]]
    axes *= np.sign(axes[np.abs(axes).argmax(axis=0), np.arange(64)])
    reference = centred @ axes
    reference *= 0.02 / reference.std(ddof=1)
    assert table.shape == (30522, 64)
    np.testing.assert_allclose(table.numpy(), reference, atol=1e-5)


def test_an_unseen_word_becomes_known_sub_words_with_pretrained_rows(minilm_dir, tokenizer):
    from distrl_core.policy.model import default_tokenizer

    words = default_tokenizer(vocabulary="fit_unseen")
    config = PolicyConfig(device="cpu", subwords=SubwordSettings(source=str(minilm_dir)))
    policy = Policy.create(config)
    table = policy.model.get_input_embeddings().weight.detach()
    for word in ("pizzeria", "gallery", "pictures"):
        assert words.convert_tokens_to_ids(words.tokenize(word)) == [words.unk_token_id], word
        ids = policy.tokenizer(word, add_special_tokens=False)["input_ids"]
        assert ids and policy.tokenizer.unk_token_id not in ids, word
        assert all(float(table[i].norm()) > 0 for i in ids)
    # the pretrained meaning survives the projection: a synonym is nearer than an unrelated word
    row = {w: table[policy.tokenizer.convert_tokens_to_ids(w)] for w in ("photos", "pictures", "alarm")}
    cosine = torch.nn.functional.cosine_similarity
    assert cosine(row["photos"], row["pictures"], dim=0) > cosine(row["photos"], row["alarm"], dim=0) + 0.2


def test_the_policy_embeds_the_table_frozen_and_its_config_is_checked(encoder_dir):
    policy = Policy.create(_small_config(encoder_dir))
    embedding = policy.model.get_input_embeddings()
    expected = subword_table(SubwordSettings(source=str(encoder_dir)), 16)
    expected[policy.tokenizer.pad_token_id] = 0.0
    assert torch.equal(embedding.weight.detach(), expected)
    assert not embedding.weight.requires_grad
    assert all(p is not embedding.weight for p in policy.actor_parameters())
    trained = Policy.create(_small_config(encoder_dir, train_embeddings=True))
    assert any(p is trained.model.get_input_embeddings().weight for p in trained.actor_parameters())
    with pytest.raises(ValueError, match="hidden_size"):
        wide = TinyModelConfig(hidden_size=80, num_heads=2)  # wider than the encoder's 72
        Policy.create(
            PolicyConfig(device="cpu", tiny=wide, subwords=SubwordSettings(source=str(encoder_dir)))
        )
    with pytest.raises(ValueError, match="base=None"):
        PolicyConfig(base=str(encoder_dir), subwords=SubwordSettings(source=str(encoder_dir)))
    with pytest.raises(ValueError, match="leave it empty"):
        PolicyConfig(tokenizer_extra_words=["x"], subwords=SubwordSettings(source=str(encoder_dir)))


def test_tiny_minilm_is_chosen_as_bases_are_from_the_demo_to_the_policy(encoder_dir, monkeypatch):
    from pydantic import ValidationError

    from bench.demo_seeds import DemoSettings
    from distrl_core.policy import pretrained
    from distrl_core.policy.defaults import TINY, describe_defaults, training_defaults
    from flows.train_local_params import TrainLocalParams
    from ops.cli import _parse

    prepared = pretrained.ConvertedModel(encoder_dir, encoder_dir, False, 0)
    monkeypatch.setitem(pretrained.PACKAGED_BASES, "minilm", lambda: prepared)  # the packaged MiniLM
    args = _parse(["demo", "--base", "tiny-minilm", "--seed", "3", "--validation", "--validation-split",
                   "validation_unseen"])  # fmt: skip
    params = args.options.build(args)
    assert params.base == "tiny-minilm"
    config = policy_config_for(params.base, 3, "fit_unseen")
    assert config.base is None and config.subwords is not None
    assert config.subwords.source == str(encoder_dir.resolve()) and config.tiny.seed == 3
    assert training_defaults(config) is TINY  # the tiny model's learning rates and batches
    assert "sub-words" in describe_defaults(config)
    assert PolicyConfig.from_dict(config.to_dict()) == config  # as policy.json stores it
    assert "--base" in DemoSettings(minutes=6, base="tiny-minilm").flags()
    with pytest.raises(ValueError, match="encoder_layers"):
        policy_config_for("tiny-minilm", encoder_layers=1)
    with pytest.raises(ValidationError, match="encoder_layers applies to an encoder base"):
        TrainLocalParams(base="tiny-minilm", encoder_layers=1)


def test_the_demo_defaults_to_tiny_minilm_words_values_and_base_tiny_is_the_word_vocabulary_model():
    from ops.cli import _parse
    from ops.cli_flows import demo_params

    demo = _parse(["demo", "--seed", "1"])
    assert demo_params(demo).base == "tiny-minilm-words-values"  # `distrl demo`'s own default
    train_local = _parse(["train-local"])
    assert train_local.options.build(train_local).base is None  # the flows keep the tiny default
    old = _parse(["demo", "--base", "tiny"])
    config = policy_config_for(old.options.build(old).base, 2)
    assert config == policy_config_for(None, 2) and config.subwords is None and config.base is None
    assert _parse(["demo", "--pretrained"]).base == "minilm"


def test_the_table_cache_never_outlives_a_change_of_its_encoder(tmp_path):
    folder = write_small_encoder(tmp_path / "enc", seed=0)
    settings = SubwordSettings(source=str(folder))
    before = subword_table(settings, 8)
    assert torch.equal(before, subword_table(settings, 8))  # served from the cache
    subword_table(settings, 8).zero_()  # a caller's copy: the cached table is not touched
    assert torch.equal(before, subword_table(settings, 8))
    write_small_encoder(folder, seed=1)  # other weights in the same folder
    after = subword_table(settings, 8)
    fresh = scaled_to_std(principal_projection(read_word_embeddings(folder), 8), 0.02).float()
    assert not torch.allclose(before, after, atol=1e-3)
    assert torch.allclose(after, fresh, atol=1e-6)


def test_a_version_round_trips_with_identical_log_probs_and_refuses_another_encoder(tmp_path, sim_rows):
    folder = write_small_encoder(tmp_path / "enc", seed=0)
    policy = Policy.create(_small_config(folder))
    with torch.no_grad():  # saved weights that differ from a fresh build
        for parameter in policy.model.parameters():
            if parameter.requires_grad:
                parameter.add_(0.05 * torch.randn_like(parameter))
    save_policy(policy, tmp_path / "v1")
    assert json.loads((tmp_path / "v1" / "policy.json").read_text())["subwords"]["source"] == str(folder)
    loaded = load_policy(tmp_path / "v1", device="cpu")
    batch = StepBatch.from_rows(sim_rows)
    assert torch.equal(policy.evaluate(batch).logp, loaded.evaluate(batch).logp)
    assert loaded.base.hash == policy.base.hash
    assert not loaded.model.get_input_embeddings().weight.requires_grad  # still frozen after a load
    fresh = Policy.create(_small_config(folder))
    assert not torch.allclose(fresh.evaluate(batch).logp, loaded.evaluate(batch).logp, atol=1e-4)
    write_small_encoder(folder, seed=1)  # the encoder the table came from changes
    with pytest.raises(BaseMismatchError, match="sub-words"):
        load_policy(tmp_path / "v1", device="cpu")


def test_an_update_trains_the_tiny_layers_and_leaves_the_table(encoder_dir, episode_rows):
    from distrl_core.learner import Learner, LearnerConfig

    policy = Policy.create(_small_config(encoder_dir))
    table = policy.model.get_input_embeddings().weight.detach().clone()
    layers = {n: p.detach().clone() for n, p in policy.model.named_parameters() if p.requires_grad}
    learner = Learner(policy, LearnerConfig(seed=0, critic_warmup_updates=0))
    learner.update(StepBatch.from_rows(episode_rows))
    assert torch.equal(policy.model.get_input_embeddings().weight.detach(), table)
    changed = [
        n for n, p in policy.model.named_parameters() if p.requires_grad and not torch.equal(p, layers[n])
    ]
    assert changed


def test_scoring_reads_the_decoder_body_as_the_full_model_would(encoder_dir, sim_rows):
    import dataclasses

    from distrl_core.policy import scoring
    from distrl_core.policy.types import StepInput

    policy = Policy.create(_small_config(encoder_dir)).eval()
    steps = [StepInput(r["instruction"], r["observation_text"], r["action"]) for r in sim_rows[:12]]
    body = scoring.evaluate_scoring(policy.parts(), steps)  # the LM head skipped
    # the same weights through the whole causal LM, as a tiny model without sub-words is run
    full_config = dataclasses.replace(policy.config, subwords=None)
    full = scoring.evaluate_scoring(dataclasses.replace(policy.parts(), config=full_config), steps)
    for name in ("logp", "entropy", "values", "traj_logits"):
        assert torch.equal(body[name], full[name]), name
