"""The semantic match feature limited to named labels (SubwordSettings.semantic_labels, base
"tiny-minilm-apps"): only the elements labelled as one of them carry an index, "most similar" is
among the whole scope (on the screen or not), a version round-trips with its scope and never
shares a hash with the unscoped feature, and the base's labels are SimDroid's apps."""

from __future__ import annotations

import pytest
import torch

from distrl_core.learner.batch import StepBatch
from distrl_core.policy import Policy, PolicyConfig, load_policy, save_policy
from distrl_core.policy.config import SubwordSettings, policy_config_for
from distrl_core.policy.semantic_match import (
    BIN_EDGES,
    BINS,
    LISTED_LABELS_MIN,
    NEUTRAL,
    cosine_similarities,
    embedding_cache,
    scoped_indices,
)
from distrl_core.policy.vocabulary import APP_LABELS_PATH, app_labels
from tests.policy.subword_encoder import small_subword_config, write_small_encoder

SCOPE = ("Settings", "Clock", "Gmail", "Calendar", "Play Store", "Translate")
APPS = tuple((label,) for label in SCOPE)  # the scope as paths: each app alone
LAUNCHER = "\n".join(
    f'[{k}] TextView "{label}" ({k * 10},0,{k * 10 + 10},10)'
    for k, label in enumerate(["Search", "Settings", "gmail", "Calendar", "Weather", "Clock"])
)  # a launcher page: the search bar and "Weather" are no label of the scope; "gmail" differs in case


def _reference(scope_similarities: list[float], k: int) -> int:
    """Plain loop: 1 + the bin of scope label k's similarity, + BINS when no scope label beats it."""
    value = scope_similarities[k]
    bin_ = sum(1 for edge in BIN_EDGES if value >= edge)
    best = all(value >= other for other in scope_similarities)
    return 1 + bin_ + (BINS if best else 0)


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory):
    return write_small_encoder(tmp_path_factory.mktemp("scope") / "small", seed=0)


def test_scoped_indices_equal_a_plain_loop():
    similarities = [0.05, 0.31, 0.72, 0.44, 0.72, 0.18]  # a tie for the scope's best (Gmail, Play Store)
    labels = ["gmail", "Search", "Clock", "Weather", "PLAY STORE", "Translate"]
    indices = scoped_indices(labels, APPS, torch.tensor(similarities)).tolist()
    expected = []
    for label in labels:
        k = next((i for i, s in enumerate(SCOPE) if s.casefold() == label.casefold()), None)
        expected.append(NEUTRAL if k is None else _reference(similarities, k))
    assert indices == expected
    assert indices[0] == 1 + 7 + BINS and indices[4] == 1 + 7 + BINS  # both best, case aside
    assert indices[1] == indices[3] == NEUTRAL  # not in the scope
    # The scope's best is off the screen: no element on it is marked most similar.
    page = ["Settings", "Clock", "Calendar", "Weather"]
    off_screen_best = scoped_indices(page, APPS, torch.tensor(similarities)).tolist()
    assert off_screen_best == [_reference(similarities, SCOPE.index(label)) for label in page[:3]] + [NEUTRAL]
    assert all(index <= BINS for index in off_screen_best)
    # With a margin the best is marked only when it leads the second by that much: a tie marks none.
    tied = scoped_indices(labels, APPS, torch.tensor(similarities), margin=0.05).tolist()
    assert tied == [NEUTRAL if i == NEUTRAL else (i - BINS if i > BINS else i) for i in indices]
    lead = [0.05, 0.31, 0.72, 0.44, 0.66, 0.18]  # Gmail leads Play Store by 0.06
    for margin, marked in ((0.05, True), (0.07, False)):
        got = scoped_indices(
            ["Gmail", "Play Store", "Clock"], APPS, torch.tensor(lead), margin=margin
        ).tolist()
        assert (got[0] > BINS) is marked and got[1] <= BINS
        assert (got[0] - 1) % BINS == (_reference(lead, 2) - 1) % BINS  # the bin is kept either way
    # A screen that shows fewer of the scope's labels is an app's own (its title, a tab): unscored.
    few = ["Clock", "Add alarm", "clock", "Settings"][:LISTED_LABELS_MIN]
    assert scoped_indices(few, APPS, torch.tensor(similarities)).tolist() == [NEUTRAL] * len(few)


def test_only_the_scope_s_elements_carry_the_feature(encoder_dir):
    policy = Policy.create(small_subword_config(encoder_dir, semantic_match=True, semantic_labels=SCOPE))
    cache = embedding_cache()
    for instruction in ("check my email", "open the translator", "set an alarm for 7 am"):
        step = policy.encode(instruction, LAUNCHER)
        assert step.semantic is not None
        vector = cache.compute(str(encoder_dir), [instruction])[0]
        scope_similarities = [
            float(cosine_similarities(vector, cache.compute(str(encoder_dir), [label]))[0]) for label in SCOPE
        ]
        marked = set()
        for first, end, label in step.elements:
            k = next((i for i, s in enumerate(SCOPE) if s.casefold() == label.casefold()), None)
            expected = NEUTRAL if k is None else _reference(scope_similarities, k)
            assert set(step.semantic[first:end]) == {expected}, (instruction, label)
            marked.update(range(first, end) if k is not None else ())
        assert all(step.semantic[i] == NEUTRAL for i in range(len(step.input_ids)) if i not in marked)
        assert len(marked) > 0
    # Unscoped, the same launcher marks every element, the search bar and Weather too.
    every = Policy.create(small_subword_config(encoder_dir, semantic_match=True)).encode(
        "check my email", LAUNCHER
    )
    assert every.semantic is not None
    assert all(NEUTRAL not in every.semantic[first:end] for first, end, _ in every.elements)


def test_a_scoped_version_round_trips_and_hashes_apart(tmp_path, encoder_dir, sim_rows):
    scoped = Policy.create(small_subword_config(encoder_dir, semantic_match=True, semantic_labels=SCOPE))
    with torch.no_grad():
        scoped.heads.semantic.weight[1:].add_(0.1 * torch.randn_like(scoped.heads.semantic.weight[1:]))
    save_policy(scoped, tmp_path / "v1")
    loaded = load_policy(tmp_path / "v1", device="cpu")
    assert loaded.config.subwords is not None and loaded.config.subwords.semantic_labels == SCOPE
    batch = StepBatch.from_rows(sim_rows)
    assert torch.equal(scoped.evaluate(batch).logp, loaded.evaluate(batch).logp)
    unscoped = Policy.create(small_subword_config(encoder_dir, semantic_match=True))
    other = Policy.create(small_subword_config(encoder_dir, semantic_match=True, semantic_labels=SCOPE[:-1]))
    margin = Policy.create(
        small_subword_config(encoder_dir, semantic_match=True, semantic_labels=SCOPE, semantic_margin=0.05)
    )
    assert len({scoped.base.hash, unscoped.base.hash, other.base.hash, margin.base.hash}) == 4


def test_the_settings_refuse_a_scope_without_the_feature_and_read_a_saved_list(encoder_dir):
    with pytest.raises(
        ValueError, match="semantic_labels and semantic_prior shape the semantic match feature"
    ):
        small_subword_config(encoder_dir, semantic_labels=SCOPE)
    config = small_subword_config(encoder_dir, semantic_match=True, semantic_labels=list(SCOPE))
    assert config.subwords is not None and config.subwords.semantic_labels == SCOPE  # a JSON list
    assert PolicyConfig.from_dict(config.to_dict()) == config
    assert SubwordSettings(str(encoder_dir)).semantic_labels == ()  # scored everywhere by default
    with pytest.raises(ValueError, match="semantic_margin applies to the scoped feature"):
        small_subword_config(encoder_dir, semantic_match=True, semantic_margin=0.05)
    with pytest.raises(ValueError, match=r"semantic_margin must be in \[0, 1\)"):
        small_subword_config(encoder_dir, semantic_match=True, semantic_labels=SCOPE, semantic_margin=-0.1)


def test_tiny_minilm_apps_scores_simdroid_s_app_names(encoder_dir, monkeypatch):
    from distrl_core.policy import pretrained
    from simulators.simdroid.catalog import APPS

    assert app_labels() == tuple(app.name for app in APPS), (
        f"{APP_LABELS_PATH} is out of date: run `python -m simulators.corpus --write`"
    )
    prepared = pretrained.ConvertedModel(encoder_dir, encoder_dir, False, 0)
    monkeypatch.setitem(pretrained.PACKAGED_BASES, "minilm", lambda: prepared)
    config = policy_config_for("tiny-minilm-apps", 2, "fit_unseen")
    assert config.subwords is not None and config.subwords.semantic_match
    assert config.subwords.semantic_labels == app_labels() and config.subwords.semantic_margin == 0
    margin = policy_config_for("tiny-minilm-apps-margin", 2).subwords
    assert margin is not None and margin.semantic_labels == app_labels() and margin.semantic_margin == 0.05
    prior = policy_config_for("tiny-minilm-apps-prior", 2).subwords
    assert prior is not None and prior.semantic_prior and prior.semantic_labels == app_labels()
    from distrl_core.policy.defaults import describe_defaults

    assert "similarity of its 24 app names on a launcher" in describe_defaults(config)
    assert "similarity" not in describe_defaults(policy_config_for("tiny-minilm", 2))
    for base in ("tiny-minilm-sem", "tiny-minilm"):
        subwords = policy_config_for(base, 2).subwords
        assert subwords is not None and subwords.semantic_labels == ()


def test_the_prior_adds_its_index_s_score_to_each_tap(encoder_dir):
    from distrl_core.policy.scoring import score_steps

    options = {"semantic_match": True, "semantic_labels": SCOPE}
    plain = Policy.create(small_subword_config(encoder_dir, **options))
    prior = Policy.create(small_subword_config(encoder_dir, semantic_prior=True, **options))
    assert plain.heads.semantic_prior is None and prior.heads.semantic_prior is not None
    weights = prior.heads.semantic_prior.weight
    assert torch.equal(weights, torch.zeros_like(weights))  # starts as the policy without it
    # Built last: every other weight is what the policy without it draws.
    shared = dict(plain.heads.named_parameters())
    for name, parameter in prior.heads.named_parameters():
        assert name.startswith("semantic_prior") or torch.equal(parameter, shared[name]), name
    for mine, theirs in zip(prior.model.parameters(), plain.model.parameters(), strict=True):
        assert torch.equal(mine, theirs)
    with torch.no_grad():
        weights[1:] = torch.linspace(-2.0, 3.0, weights.shape[0] - 1)[:, None]
    steps = [prior.encode(text, LAUNCHER) for text in ("check my email", "open the calendar")]
    with torch.no_grad():
        with_prior = score_steps(prior.eval().parts(), steps).log_probs  # (N, K)
        without = score_steps(plain.eval().parts(), steps).log_probs  # (N, K)
    for n, step in enumerate(steps):
        assert step.semantic is not None
        # Plain loop: each candidate's score gains the prior of its first token's index.
        shifted = [
            float(without[n, k]) + float(weights.detach()[step.semantic[first], 0]) / prior.config.temperature
            for k, (first, _) in enumerate(step.spans)
        ]
        total = torch.logsumexp(torch.tensor(shifted), dim=0)
        expected = torch.tensor(shifted) - total
        torch.testing.assert_close(with_prior[n, : len(step.spans)], expected, atol=1e-5, rtol=0)
        taps = [k for k, (first, _) in enumerate(step.spans) if step.semantic[first] != NEUTRAL]
        assert taps and len(taps) < len(step.spans)  # the scope's taps moved, the rest by the norm only
