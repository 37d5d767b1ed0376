"""Vision-language bases of two real architectures (Gemma 3; Idefics3, SmolVLM's), tiny and random,
built here by bench.tiny_vlm with their real processors and a BPE tokenizer trained on SimDroid text:
the folder is recognised, LoRA adapts the text decoder only, save -> load keeps the log-probs, and a
warm start -> one A-RIDE block on collected screenshot steps -> publish -> fetch -> act runs."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from bench.tiny_vlm import FAMILIES, write_tiny_vlm
from distrl_core.learner import Learner, LearnerConfig, StepBatch
from distrl_core.policy import Policy, load_policy, save_policy
from distrl_core.policy.backbone import language_model_linears
from distrl_core.policy.config import policy_config_for
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from tests.policy.vision_rows import acted_rows

SCREEN_ENV = SimDroidEnvConfig(screenshots=True, ui_xml=False)


@pytest.fixture(scope="module", params=FAMILIES)
def vlm_dir(request, tmp_path_factory):
    return write_tiny_vlm(request.param, tmp_path_factory.mktemp(request.param), tasks=40)


def _policy(vlm_dir, max_new_tokens: int = 6) -> Policy:
    config = policy_config_for(str(vlm_dir), device="cpu")
    return Policy.create(dataclasses.replace(config, max_new_tokens=max_new_tokens))


def test_a_vlm_folder_gets_the_vision_policy_with_lora_on_its_text_decoder_only(vlm_dir):
    policy = _policy(vlm_dir)
    assert policy.config.vision and policy.config.mode == "generative" and policy.config.lora is not None
    assert type(policy.processor).__name__ in ("Gemma3Processor", "Idefics3Processor")
    base = policy.model.get_base_model()
    adapted = {name.removesuffix(".lora_A") for name, _ in base.named_modules() if name.endswith(".lora_A")}
    # PEFT wraps each target: its original linear is now the wrapper's `base_layer`
    targets = {
        name.removesuffix(".base_layer")
        for name in language_model_linears(base)
        if name.endswith("base_layer")
    }
    assert adapted == targets and len(adapted) == 7  # q, k, v, o, gate, up, down of the one text layer
    decoder = next(name for name, module in base.named_modules() if module is base.get_decoder())
    assert all(name.startswith(f"{decoder}.") for name in adapted)
    trainable = [name for name, p in policy.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in name for name in trainable)
    assert not any("vision" in name for name in trainable)


def test_acting_and_rescoring_agree_and_save_load_keeps_the_log_probs(vlm_dir, tmp_path):
    policy = _policy(vlm_dir)
    env = SimDroidEnv(SCREEN_ENV)
    observations = [env.reset(f"general-train-{i:04d}", seed=i) for i in (0, 50)]
    outputs = policy.act(observations)
    batch = StepBatch.from_rows(acted_rows(observations, outputs))
    scored = policy.evaluate(batch)
    # what the learner recomputes for each stored action is the behaviour log-prob it was stored with
    assert torch.allclose(scored.logp[:, 0].detach(), batch.logp_mu[:, 0], atol=1e-4)
    assert all(o.logprob < 0 and o.token_count > 0 for o in outputs)

    with torch.no_grad():  # a trained adapter: LoRA's B starts at zero, which would hide a lost adapter
        for name, parameter in policy.model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0.0, 0.05)
    trained = policy.evaluate(batch).logp.detach()
    assert not torch.allclose(trained, scored.logp.detach(), atol=1e-3)
    loaded = load_policy(save_policy(policy, tmp_path / "v1"), device="cpu")
    assert type(loaded.processor) is type(policy.processor)
    assert torch.equal(loaded.evaluate(batch).logp.detach(), trained)


def test_warm_start_then_an_aride_block_then_publish_fetch_and_act(vlm_dir, tmp_path):
    import mlflow
    import pandas as pd

    from distrl_core.envs.actions import format_action
    from simulators.rollout import RolloutConfig, run_episodes
    from simulators.simdroid.tasks import load_tasks
    from simulators.warm_start import WarmStartConfig, collect_demonstrations, supervised_warm_start
    from storage.registry import PolicyRegistry, RegistrySettings

    policy = _policy(vlm_dir, max_new_tokens=8)
    tasks = load_tasks("general", "train")[:4]
    warm = WarmStartConfig(family="general", updates=4, batch_size=4, seed=0)
    demos = collect_demonstrations(warm, tasks, env=SCREEN_ENV)
    assert all(row["screenshot_png"] for row in demos.rows)
    history = supervised_warm_start(policy, demos.rows, warm)
    assert history[-1]["nll"] < history[0]["nll"]  # the same four episodes each time: it fits them

    collected = run_episodes(policy, tasks[:2], RolloutConfig(env=SCREEN_ENV, parallel_envs=2, seed=1))
    rows = collected.rows
    assert rows and all(row["screenshot_png"] for row in rows)
    adapter = {n: p.detach().clone() for n, p in policy.model.named_parameters() if p.requires_grad}
    learner = Learner(policy, LearnerConfig(critic_warmup_updates=0, seed=0))
    for _ in range(2):  # one block of A-RIDE updates on the collected screenshot steps
        metrics, priorities = learner.update(StepBatch.from_rows(rows))
        assert all(v == v for v in metrics.values()) and len(priorities) == 2  # no NaN
    moved = [
        n for n, p in policy.model.named_parameters() if p.requires_grad and not torch.equal(p, adapter[n])
    ]
    assert moved and all("lora_" in n for n in moved)

    registry = PolicyRegistry(
        RegistrySettings(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", cache_dir=str(tmp_path / "cache"))
    )
    version = registry.publish(save_policy(policy, tmp_path / "policy"), run_id=registry.start_run("learner"))
    fetched = load_policy(registry.fetch(str(version)).path, device="cpu")
    observation = SimDroidEnv(SCREEN_ENV).reset(tasks[3], seed=3)
    (mine,) = policy.act([observation], greedy=True)
    (theirs,) = fetched.act([observation], greedy=True)
    assert theirs.raw_text == mine.raw_text and theirs.logprob == pytest.approx(mine.logprob, abs=1e-5)

    # the version is an MLflow pyfunc model: given the screenshot, it answers as the policy does
    model = mlflow.pyfunc.load_model(str(registry.fetch(str(version)).path))
    step = {
        "instruction": observation.instruction,
        "observation_text": observation.ui_text,
        "previous_actions": "",
        "screenshot_png": observation.screenshot_png,
    }
    answer = model.predict(pd.DataFrame([step]))
    assert answer["action"][0] == format_action(mine.action)
    assert answer["logprob"][0] == pytest.approx(mine.logprob, abs=1e-5)
