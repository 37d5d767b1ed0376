"""A policy on a pretrained encoder's sub-words (PolicyConfig.subwords), with or without the
encoder's contextual states, published as an MLflow pyfunc model loads and answers with the
log-probability the policy itself gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.registry import PolicyRegistry, RegistrySettings
from tests.policy.subword_encoder import write_small_encoder

STEP = {
    "instruction": "Turn on Wi-Fi at the pizzeria",
    "observation_text": '[0] Switch "Wi-Fi" off (0,420,1080,540)\n[1] Switch "Bluetooth" on (0,540,1080,660)',
    "previous_actions": "",
}


@pytest.mark.parametrize("context", [False, True], ids=["static", "context-states"])
def test_a_subword_policy_round_trips_through_the_pyfunc_model(tmp_path: Path, monkeypatch, context) -> None:
    import mlflow
    import pandas as pd
    import torch

    from distrl_core.envs.actions import format_action
    from distrl_core.policy import Policy, PolicyConfig, load_policy, save_policy
    from distrl_core.policy.config import SubwordSettings, TinyModelConfig
    from tasks.policy_pyfunc import observations_of

    encoder = write_small_encoder(tmp_path / "encoder", seed=0)
    config = PolicyConfig(
        device="cpu",
        tiny=TinyModelConfig(hidden_size=16, num_heads=2, intermediate_size=32),
        subwords=SubwordSettings(source=str(encoder), context_states=context),
    )
    policy = Policy.create(config)
    with torch.no_grad():  # weights a fresh build would not have (the zero context map's too)
        for parameter in [*policy.model.parameters(), *policy.heads.parameters()]:
            if parameter.requires_grad:
                parameter.add_(0.05 * torch.randn_like(parameter))
    observations = observations_of(pd.DataFrame([STEP]), config.screen_size)
    (expected,) = policy.eval().act(observations, greedy=True)
    saved = save_policy(policy, tmp_path / "policy")

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    registry = PolicyRegistry(RegistrySettings(tracking_uri=uri, cache_dir=str(tmp_path / "cache")))
    registry.set_alias("champion", registry.publish(saved, run_id=registry.start_run("learner")))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", uri)
    answer = mlflow.pyfunc.load_model("models:/distrl-policy@champion").predict(pd.DataFrame([STEP]))
    assert list(answer["action"]) == [format_action(expected.action)]
    assert answer["logprob"][0] == pytest.approx(expected.logprob, abs=1e-6)
    (reloaded,) = load_policy(registry.fetch("champion").path).eval().act(observations, greedy=True)
    assert reloaded.logprob == pytest.approx(expected.logprob, abs=1e-6)
