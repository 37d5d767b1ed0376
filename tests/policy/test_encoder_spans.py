"""Candidates read in place (EncoderSettings.candidates = "spans"): the character and token spans,
and π, V(s) and the trajectory logit against a plain reference that runs the whole Hugging Face
encoder over each observation and scores every candidate in a loop."""

from __future__ import annotations

import os
import random

import pytest
import torch

from distrl_core.policy.encoder_scoring import encoder_step
from distrl_core.policy.encoder_spans import token_spans


def _reference_spans(offsets, char_spans):
    """Plain loop: the tokens that overlap each span; none left reads the final token."""
    out = []
    for a, b in char_spans:
        hits = [i for i, (s, e) in enumerate(offsets) if e > s and s < b and e > a]
        out.append((hits[0], hits[-1] + 1) if hits else (len(offsets) - 1, len(offsets)))
    return out


def test_token_spans_equal_a_plain_overlap_loop():
    rng = random.Random(0)
    for _ in range(300):
        offsets, at = [(0, 0)], 0
        for _ in range(rng.randint(1, 40)):
            at += rng.randint(0, 2)  # gaps: spaces and separators
            width = rng.randint(1, 5)
            offsets.append((at, at + width))
            at += width
        offsets.append((0, 0))  # [SEP]
        spans = []
        for _ in range(rng.randint(1, 8)):
            a = rng.randint(0, at + 10)  # some beyond the last token: cut by truncation
            spans.append((a, a + rng.randint(1, 12)))
        assert token_spans(offsets, spans) == _reference_spans(offsets, spans)


@pytest.fixture(scope="module")
def walked():
    """(step, observation) pairs along the expert's path in General and Web Shopping tasks."""
    from distrl_core.envs.actions import format_action
    from distrl_core.policy.types import StepInput
    from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
    from simulators.simdroid.expert import expert_action
    from simulators.simdroid.tasks import load_tasks

    env = SimDroidEnv(SimDroidEnvConfig(screenshots=False))
    out = []
    for task in load_tasks("general", "train")[:5] + load_tasks("webshop", "train")[:5]:
        observation = env.reset(task, seed=1)
        for _ in range(3):  # a few steps in, where shop pages list products
            action = expert_action(env, task)
            out.append((StepInput(task.instruction, observation.ui_text, format_action(action)), observation))
            result = env.step(action)
            if result.done:
                break
            observation = result.observation
    return out


@pytest.fixture(scope="module")
def both_families(walked):
    return [step for step, _ in walked]


def test_each_candidates_character_span_holds_its_text(both_families):
    for step in both_families:
        encoded = encoder_step(step.instruction, step.observation_text, (), (1080, 2400))
        assert len(encoded.spans) == len(encoded.candidates) > 0
        for candidate, (a, b) in zip(encoded.candidates, encoded.spans, strict=True):
            assert encoded.observation[a:b] == candidate.text
        assert encoded.index_of(step.action) is not None  # the expert's action is a candidate


@pytest.fixture(scope="module")
def spans_policy(minilm_dir):
    from distrl_core.policy import Policy, PolicyConfig
    from distrl_core.policy.config import EncoderSettings

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    policy = Policy.create(
        PolicyConfig(base=str(minilm_dir), encoder=EncoderSettings(trainable_layers=1, candidates="spans"))
    )
    with torch.no_grad():  # off the initial heads, so that candidates score apart
        for p in policy.actor_parameters():
            p.add_(0.02 * torch.randn_like(p, generator=torch.Generator().manual_seed(p.numel())))
    return policy


def _reference(policy, step):
    """π, V(s) and the trajectory logit of one step, every candidate scored in a plain loop over the
    whole encoder's output (no cache, no split into frozen and trained layers)."""
    encoded = encoder_step(step.instruction, step.observation_text, (), (1080, 2400))
    backbone, heads = policy.model, policy.heads
    ids = torch.tensor([backbone.token_ids(encoded.observation)])
    hidden = backbone.encoder(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state[0]
    offsets = backbone.token_offsets(encoded.observation)
    scores = []
    for (a, b), flag in zip(_reference_spans(offsets, encoded.spans), encoded.flags, strict=True):
        span = hidden[a:b] + heads.match.weight[flag]
        scores.append(heads.score(torch.cat([span.mean(0), span[-1]])).squeeze())
    log_pi = torch.log_softmax(torch.stack(scores) / policy.config.temperature, dim=0)
    instruction = len(backbone.token_ids(encoded.observation[: encoded.instruction_chars])) - 1
    value = heads.state_value(hidden.mean(0, keepdim=True))[0]
    trajectory = heads.trajectory_logit(hidden[:instruction].mean(0, keepdim=True))[0]
    return log_pi[encoded.index_of(step.action)], value, trajectory


@pytest.mark.slow  # loads the 23 M-parameter base
def test_span_scoring_equals_the_plain_reference(spans_policy, both_families):
    with torch.no_grad():
        got = spans_policy.evaluate_steps(both_families)
        for i, step in enumerate(both_families):
            log_pi, value, trajectory = _reference(spans_policy, step)
            assert torch.allclose(got["logp"][i], log_pi, atol=1e-5), i
            assert torch.allclose(got["values"][i], value, atol=1e-5), i
            assert torch.allclose(got["traj_logits"][i], trajectory, atol=1e-5), i


@pytest.mark.slow  # loads the 23 M-parameter base
def test_span_scoring_acts_saves_and_learns_consistently(spans_policy, walked, tmp_path):
    from distrl_core.envs.actions import format_action
    from distrl_core.policy import load_policy, save_policy
    from distrl_core.policy.types import StepInput

    both_families = [step for step, _ in walked]
    acted = spans_policy.act([observation for _, observation in walked], greedy=False)
    stored = [
        StepInput(s.instruction, s.observation_text, format_action(a.action))
        for s, a in zip(both_families, acted, strict=True)
    ]
    with torch.no_grad():
        logp = spans_policy.evaluate_steps(stored)["logp"]
    assert torch.allclose(logp, torch.tensor([a.logprob for a in acted]), atol=1e-5)  # learner == collector

    loaded = load_policy(save_policy(spans_policy, tmp_path / "v1"))
    assert loaded.config.encoder.candidates == "spans"
    with torch.no_grad():
        assert torch.equal(
            loaded.evaluate_steps(both_families)["logp"], spans_policy.evaluate_steps(both_families)["logp"]
        )

    # The log-likelihood of the expert's actions reaches the top layer and the heads, and a step up it helps.
    copy = load_policy(tmp_path / "v1")
    before = copy.evaluate_steps(both_families)["logp"]
    (-before.sum()).backward()  # the optimiser descends: up the log-likelihood
    top = [p for n, p in copy.model.encoder.named_parameters() if p.requires_grad]
    assert top and all(p.grad is not None and torch.isfinite(p.grad).all() for p in top)
    assert all(p.grad is not None for p in copy.heads.score.parameters())
    optimiser = torch.optim.Adam(copy.actor_parameters(), lr=1e-4)
    optimiser.step()
    with torch.no_grad():
        assert copy.evaluate_steps(both_families)["logp"].sum() > before.sum().detach()
