"""Acting and re-scoring agree; versions round-trip; a changed base is refused."""

from __future__ import annotations

import json
import math

import pytest
import torch

from distrl_core.envs.actions import ActionKind
from distrl_core.learner.batch import StepBatch
from distrl_core.policy import BaseMismatchError, LoraSettings, Policy, PolicyConfig, load_policy, save_policy
from simulators.rollout import RolloutConfig, run_episodes
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig


def _observations(count: int):
    env = SimDroidEnv(SimDroidEnvConfig(screenshots=False, ui_xml=False))
    return [env.reset(f"general-test-{i:04d}", seed=i) for i in range(count)]


def test_act_returns_candidates_with_exact_log_probs(make_policy):
    policy = make_policy()
    observations = _observations(6)
    outputs = policy.act(observations)
    for observation, output in zip(observations, outputs, strict=True):
        candidates = policy.encode(observation.instruction, observation.ui_text).candidates
        assert output.raw_text in [c.action_text for c in candidates]
        assert output.logprob <= 0.0
        assert 0.0 <= output.entropy <= math.log(len(candidates)) + 1e-5
    greedy = [o.raw_text for o in policy.act(observations, greedy=True)]
    assert greedy == [o.raw_text for o in policy.act(observations, greedy=True)]


def test_behaviour_log_probs_equal_the_learners(make_policy, sim_rows):
    policy = make_policy()
    rows = run_episodes(policy, ["general-train-0010", "webshop-train-0005"], RolloutConfig(seed=1)).rows
    batch = StepBatch.from_rows(rows)
    out = policy.evaluate(batch)
    assert bool(out.known[batch.mask].all())
    stored = batch.logp_mu[batch.mask]
    assert torch.allclose(out.logp[batch.mask].detach(), stored, atol=1e-5)
    # and a different policy's rows are scored differently (the check can fail)
    other = make_policy(tiny={"seed": 5})
    assert not torch.allclose(other.evaluate(batch).logp[batch.mask].detach(), stored, atol=1e-3)


def test_length_buckets_score_like_one_padded_forward(make_policy, episode_rows, monkeypatch):
    from distrl_core.policy import scoring

    policy = make_policy()
    policy.eval()
    batch = StepBatch.from_rows(episode_rows)
    assert int(batch.mask.sum()) > 8
    with torch.no_grad():
        monkeypatch.setattr(scoring, "LENGTH_BUCKET", 10**6)
        whole = policy.evaluate(batch)
        monkeypatch.setattr(scoring, "LENGTH_BUCKET", 3)  # several buckets of unequal lengths
        bucketed = policy.evaluate(batch)
    mask = batch.mask
    for name in ("logp", "entropy", "values"):
        assert torch.allclose(getattr(whole, name)[mask], getattr(bucketed, name)[mask], atol=1e-5), name
    assert torch.allclose(whole.traj_logits, bucketed.traj_logits, atol=1e-5)
    assert torch.equal(whole.known, bucketed.known)


def test_generative_mode_log_probs_agree(make_policy):
    policy = make_policy(mode="generative", max_new_tokens=6)
    observations = _observations(3)
    outputs = policy.act(observations)
    for output in outputs:
        assert 1 <= output.token_count <= 6
        assert output.action.kind is ActionKind.INVALID or output.action.is_valid
    rows = [
        {
            "episode_id": f"e{i}", "step": 0, "instruction": o.instruction, "observation_text": o.ui_text,
            "raw_output": a.raw_text, "action": a.raw_text, "action_valid": True, "reward": 0.0, "done": True,
            "episode_success": False, "behaviour_logprob": a.logprob, "action_token_count": a.token_count,
            "policy_version": 0,
        }
        for i, (o, a) in enumerate(zip(observations, outputs, strict=True))
    ]  # fmt: skip
    batch = StepBatch.from_rows(rows)
    out = policy.evaluate(batch)
    assert torch.allclose(out.logp[:, 0].detach(), batch.logp_mu[:, 0], atol=1e-4)
    assert bool((out.entropy[:, 0] > 0).all())


def test_version_round_trip(make_policy, sim_rows, tmp_path):
    policy = make_policy()
    with torch.no_grad():  # make the saved weights differ from a fresh build
        for parameter in policy.model.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    save_policy(policy, tmp_path / "v1")
    loaded = load_policy(tmp_path / "v1", device="cpu")
    batch = StepBatch.from_rows(sim_rows)
    assert torch.allclose(policy.evaluate(batch).logp, loaded.evaluate(batch).logp, atol=1e-6)
    assert loaded.base.hash == policy.base.hash
    fresh = make_policy()
    assert not torch.allclose(fresh.evaluate(batch).logp, loaded.evaluate(batch).logp, atol=1e-4)


def test_tiny_base_hash_mismatch_is_refused(make_policy, tmp_path):
    save_policy(make_policy(), tmp_path / "v1")
    meta = json.loads((tmp_path / "v1" / "base.json").read_text())
    recorded = meta["hash"]
    meta["hash"] = "0" * 64
    (tmp_path / "v1" / "base.json").write_text(json.dumps(meta))
    with pytest.raises(BaseMismatchError) as excinfo:
        load_policy(tmp_path / "v1")
    assert "0" * 64 in str(excinfo.value) and recorded in str(excinfo.value)


def test_lora_version_over_a_local_pretrained_base(make_policy, tokenizer, tmp_path, sim_rows):
    base_dir = tmp_path / "base"
    make_policy().model.save_pretrained(base_dir)
    tokenizer.save_pretrained(base_dir)
    config = PolicyConfig(base=str(base_dir), lora=LoraSettings(r=4, alpha=8), device="cpu")
    policy = Policy.create(config)
    trainable = [n for n, p in policy.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora" in n for n in trainable)
    with torch.no_grad():
        for name, parameter in policy.model.named_parameters():
            if "lora_B" in name:
                parameter.add_(0.05)
    save_policy(policy, tmp_path / "v1")
    assert (tmp_path / "v1" / "adapter").is_dir() and not (tmp_path / "v1" / "model").exists()
    loaded = load_policy(tmp_path / "v1")
    batch = StepBatch.from_rows(sim_rows)
    assert torch.allclose(policy.evaluate(batch).logp, loaded.evaluate(batch).logp, atol=1e-5)

    # The same path now holds other weights: the adapter would be applied to the wrong base.
    make_policy(tiny={"seed": 9}).model.save_pretrained(base_dir)
    with pytest.raises(BaseMismatchError) as excinfo:
        load_policy(tmp_path / "v1")
    message = str(excinfo.value)
    assert policy.base.hash in message and "base_override" in message
