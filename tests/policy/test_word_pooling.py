"""One position per word (SubwordSettings.pool_words, bases "tiny-minilm-words" and
"tiny-minilm-words-controls"): the pooling, the word-wise dropout and a word's first piece's value
equal plain loops, spans land on their candidate's words, a prompt of one-piece words scores exactly
as without pooling (with the semantic feature along the routes and its prior too), every piece of a
word carries one semantic index, and a pooled version round-trips under its own hash."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from distrl_core.learner.batch import StepBatch
from distrl_core.policy import Policy, PolicyConfig, load_policy, save_policy, scoring
from distrl_core.policy.config import SubwordSettings
from distrl_core.policy.prompt import encode_scoring_step
from distrl_core.policy.vocabulary import app_labels, control_paths
from tests.policy.subword_encoder import small_subword_config as _config
from tests.policy.subword_encoder import steps_of, write_small_encoder


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory):
    return write_small_encoder(tmp_path_factory.mktemp("encoder") / "small", seed=0)


def test_pooling_is_the_mean_of_each_words_tokens_as_a_loop_computes_it():
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(2, 7, 3, generator=generator)
    word_of = torch.tensor(
        [[0, 0, 1, 2, 2, 2, 3], [0, 1, 1, 2, 4, 4, 4]]
    )  # row 2: 3 tokens, then padding (4)
    pooled = scoring.pool_by_word(inputs, word_of, 4)
    assert pooled.shape == (2, 4, 3)
    for row in range(2):
        for word in range(4):
            members = [t for t in range(7) if int(word_of[row, t]) == word]
            expected = torch.stack([inputs[row, t] for t in members]).mean(0) if members else torch.zeros(3)
            assert torch.allclose(pooled[row, word], expected, atol=1e-6), (row, word)
            scaled = scoring.pool_by_word(inputs, word_of, 4, norm=True)[row, word]
            assert torch.allclose(scaled, expected * max(len(members), 1) ** 0.5, atol=1e-6), (row, word)


def test_word_dropout_takes_each_word_whole_by_its_first_tokens_draw():
    drop = torch.tensor([[True, False, False, True, True, False], [False, True, True, False, False, True]])
    word_of = torch.tensor([[0, 0, 1, 1, 2, 3], [0, 0, 1, 2, 3, 3]])
    out = scoring.whole_words(drop, word_of)
    for row in range(2):
        for token in range(6):
            first = next(t for t in range(6) if int(word_of[row, t]) == int(word_of[row, token]))
            assert bool(out[row, token]) == bool(drop[row, first]), (row, token)


def test_spans_land_on_their_candidates_words(encoder_dir, sim_rows):
    policy = Policy.create(_config(encoder_dir, pool_words=True))
    tokenizer = policy.tokenizer
    row = sim_rows[3]
    instruction = "Find pizzerias near me"  # "pizzerias" splits into three pieces
    pooled = encode_scoring_step(tokenizer, instruction, row["observation_text"], pool_words=True)
    pieces = encode_scoring_step(tokenizer, instruction, row["observation_text"])
    assert pooled.input_ids == pieces.input_ids and pooled.candidates == pieces.candidates
    assert pooled.word_of is not None and pooled.positions < len(pieces.input_ids)
    words = [tokenizer.decode(ids).replace(" ", "") for ids in _words(pooled)]
    assert words[3] == "pizzerias" and len(_words(pooled)[3]) == 3  # one position, three pieces
    assert pooled.instruction_end == 5  # task : find pizzerias near me
    assert all(len(ids) == 1 for i, ids in enumerate(_words(pooled)) if i != 3)  # the rest: one piece each
    for candidate, (start, end) in zip(pooled.candidates, pooled.spans, strict=True):
        piece_start, piece_end = pieces.spans[pooled.candidates.index(candidate)]
        assert start == pooled.word_of[piece_start] and end == pooled.word_of[piece_end - 1] + 1
    assert policy.encode(instruction, row["observation_text"]) == pooled


def _words(step) -> list[list[int]]:
    out: list[list[int]] = [[] for _ in range(step.positions)]
    for token, word in zip(step.input_ids, step.word_of, strict=True):
        out[word].append(token)
    return out


def test_one_piece_words_score_exactly_as_without_pooling_and_split_words_do_not(encoder_dir, sim_rows):
    pooled = Policy.create(_config(encoder_dir, pool_words=True)).eval()
    plain = Policy.create(_config(encoder_dir))
    plain.load_state_dict(pooled.state_dict())
    plain.eval()
    steps = steps_of(sim_rows, 10)
    assert all(pooled.encode(s.instruction, s.observation_text).positions ==
               len(pooled.encode(s.instruction, s.observation_text).input_ids) for s in steps)  # fmt: skip
    with torch.no_grad():
        a, b = pooled.evaluate_steps(steps), plain.evaluate_steps(steps)
    for name in ("logp", "entropy", "values", "traj_logits"):
        assert torch.allclose(a[name], b[name], atol=1e-5), name
    split = [dataclasses.replace(steps[0], instruction="Find pizzerias near me")]
    with torch.no_grad():
        assert not torch.allclose(
            pooled.evaluate_steps(split)["values"], plain.evaluate_steps(split)["values"]
        )


def test_a_pooled_version_round_trips_learns_and_never_shares_a_hash(tmp_path, encoder_dir, episode_rows):
    from distrl_core.learner import Learner, LearnerConfig

    policy = Policy.create(_config(encoder_dir, pool_words=True))
    Learner(policy, LearnerConfig(seed=0, critic_warmup_updates=0)).update(StepBatch.from_rows(episode_rows))
    save_policy(policy, tmp_path / "v1")
    loaded = load_policy(tmp_path / "v1", device="cpu")
    batch = StepBatch.from_rows(episode_rows)
    assert loaded.config.subwords is not None and loaded.config.subwords.pool_words
    assert torch.equal(policy.evaluate(batch).logp, loaded.evaluate(batch).logp)
    assert loaded.base.hash == policy.base.hash != Policy.create(_config(encoder_dir)).base.hash


def test_the_norm_base_scales_pooled_words_and_needs_pooling(encoder_dir, monkeypatch):
    from distrl_core.policy import pretrained
    from distrl_core.policy.config import policy_config_for

    SubwordSettings(str(encoder_dir), pool_words=True, pooled_norm=True).validate()
    with pytest.raises(ValueError, match="pool_words=True"):
        SubwordSettings(str(encoder_dir), pooled_norm=True).validate()
    prepared = pretrained.ConvertedModel(encoder_dir, encoder_dir, False, 0)
    monkeypatch.setitem(pretrained.PACKAGED_BASES, "minilm", lambda: prepared)  # the packaged MiniLM
    norm = policy_config_for("tiny-minilm-words-norm", 1).subwords
    words = policy_config_for("tiny-minilm-words", 1).subwords
    assert norm is not None and norm.pool_words and norm.pooled_norm
    assert words is not None and words.pool_words and not words.pooled_norm
    routes = policy_config_for("tiny-minilm-words-controls", 1).subwords
    assert routes is not None and routes.pool_words and not routes.pooled_norm
    assert routes.semantic_match and routes.semantic_paths == control_paths()
    assert routes.semantic_labels == app_labels()


def test_pooling_refuses_what_reads_word_pieces(encoder_dir, sim_rows):
    from distrl_core.policy.distill import instruction_states

    policy = Policy.create(_config(encoder_dir, pool_words=True))
    step = policy.encode(sim_rows[0]["instruction"], sim_rows[0]["observation_text"])
    with pytest.raises(ValueError, match="distill_weight"):
        instruction_states(policy.parts(), [step])
    with pytest.raises(ValueError, match="pool_words"):
        SubwordSettings(source=str(encoder_dir), pool_words=True, context_states=True).validate()
    with pytest.raises(ValueError, match="critic"):
        PolicyConfig(
            device="cpu", critic="separate", subwords=SubwordSettings(str(encoder_dir), pool_words=True)
        )


def test_a_words_first_piece_value_is_what_a_loop_reads():
    values = torch.tensor([[5, 6, 7, 8, 9, 1, 2], [3, 4, 4, 5, 0, 0, 0]])
    word_of = torch.tensor([[0, 0, 1, 2, 2, 2, 3], [0, 1, 1, 2, 4, 4, 4]])  # row 2: padding is word 4
    out = scoring.first_piece_values(values, word_of, 4)
    for row in range(2):
        for word in range(4):
            members = [t for t in range(7) if int(word_of[row, t]) == word]
            assert int(out[row, word]) == (int(values[row, members[0]]) if members else 0), (row, word)


def _routes(encoder_dir, **options):
    return _config(
        encoder_dir,
        semantic_match=True,
        semantic_labels=app_labels(),
        semantic_paths=control_paths(),
        **options,
    )


def _route_screens(count: int) -> list:
    """Steps of SimDroid's expert on switch, alarm and app tasks: the launcher, Settings' pages, Clock."""
    from distrl_core.policy.types import StepInput
    from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
    from simulators.simdroid.device import SimDroidConfig
    from simulators.simdroid.expert import expert_action
    from simulators.simdroid.free_task import make_task

    env = SimDroidEnv(SimDroidEnvConfig(device=SimDroidConfig(distractor_prob=0.0), screenshots=False))
    tasks = [
        make_task("turn the wifi off", "toggle_setting", {"setting": "wifi", "on": False}),
        make_task("wake me at 7:15", "set_alarm", {"hour": 7, "minute": 15}),
        make_task("bring up the gallery", "open_app", {"app": "Photos"}),
    ]
    steps = []
    for task in tasks:
        observation = env.reset(task, seed=0)
        for _ in range(count):
            action = expert_action(env, task)
            steps.append(StepInput(task.instruction, observation.ui_text, str(action)))
            result = env.step(action)
            if result.done:
                break
            observation = result.observation
    return steps


def test_pooled_words_read_the_routes_feature_as_the_pieces_do(encoder_dir):
    pooled = Policy.create(_routes(encoder_dir, pool_words=True, semantic_prior=True)).eval()
    plain = Policy.create(_routes(encoder_dir, semantic_prior=True))
    assert pooled.heads.semantic_prior is not None
    with torch.no_grad():  # a prior that is not zero, so the scores read where it lands
        pooled.heads.semantic_prior.weight.normal_(generator=torch.Generator().manual_seed(1))
    plain.load_state_dict(pooled.state_dict())
    plain.eval()
    steps = _route_screens(4)
    marked = 0
    for step in steps:
        encoded = pooled.encode(step.instruction, step.observation_text)
        assert encoded.semantic is not None and encoded.word_of is not None
        by_word: dict[int, set[int]] = {}
        for word, index in zip(encoded.word_of, encoded.semantic, strict=True):
            by_word.setdefault(word, set()).add(index)
        assert all(len(indices) == 1 for indices in by_word.values())  # one index per word
        marked += any(index != 0 for index in encoded.semantic)
    assert marked >= 3  # the feature is on: launcher, Settings' pages, Clock
    one_piece = [
        s for s in steps
        if (e := pooled.encode(s.instruction, s.observation_text)).positions == len(e.input_ids)
    ]  # fmt: skip
    assert len(one_piece) >= 3
    with torch.no_grad():
        a, b = pooled.evaluate_steps(one_piece), plain.evaluate_steps(one_piece)
    for name in ("logp", "entropy", "values"):
        assert torch.allclose(a[name], b[name], atol=1e-5), name
    assert pooled.base.hash != plain.base.hash


def test_the_prior_lands_on_each_candidates_first_piece_when_words_are_split(encoder_dir):
    pooled = Policy.create(_routes(encoder_dir, pool_words=True, semantic_prior=True)).eval()
    pieces = Policy.create(_routes(encoder_dir, semantic_prior=True)).eval()
    launcher = _route_screens(1)[-1]  # the app task's first screen: the launcher
    instruction = "Find pizzerias near me, then open the gallery"  # "pizzerias": three pieces
    step = pooled.encode(instruction, launcher.observation_text)
    by_piece = pieces.encode(instruction, launcher.observation_text)
    assert step.positions < len(step.input_ids) and step.semantic is not None
    prior = pooled.heads.semantic_prior
    assert prior is not None
    with torch.no_grad():
        before = scoring.score_steps(pooled.parts(), [step]).log_probs[0]  # (K,), the prior zero
        prior.weight.normal_(generator=torch.Generator().manual_seed(2))
        after = scoring.score_steps(pooled.parts(), [step]).log_probs[0]
    # A plain loop: each candidate's prior is the index at its first word piece.
    added = torch.tensor([float(prior.weight[step.semantic[first], 0]) for first, _ in by_piece.spans])
    expected = torch.log_softmax(before + added / pooled.config.temperature, dim=-1)
    assert any(step.semantic[first] != 0 for first, _ in by_piece.spans)
    assert torch.allclose(after, expected, atol=1e-5)
