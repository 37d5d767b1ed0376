"""A vision-language base folder switches the embedded run's screenshots on: its collectors store
each step's screenshot (the learner re-scores it), and the tiny default's collectors do not."""

from __future__ import annotations

import pytest

from bench.tiny_vlm import write_tiny_vlm


@pytest.fixture(scope="module")
def vlm_dir(tmp_path_factory):
    return write_tiny_vlm("idefics3", tmp_path_factory.mktemp("idefics3"), tasks=20)


def test_a_vlm_base_gets_collectors_that_store_screenshots(vlm_dir):
    from flows.train_local import _collector_params
    from flows.train_local_params import TrainLocalParams

    assert _collector_params(TrainLocalParams(base=str(vlm_dir)), 0).screenshots
    assert not _collector_params(TrainLocalParams(), 0).screenshots


@pytest.mark.slow  # renders a screenshot per step of the 140 train tasks' demonstrations
def test_the_warm_start_of_a_vlm_base_learns_from_screenshots_and_publishes_it(vlm_dir, embedded_home):
    import dataclasses

    from distrl_core.policy import load_policy
    from distrl_core.policy.config import policy_config_for
    from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
    from simulators.warm_start import WarmStartConfig
    from storage.registry import PolicyRegistry
    from tasks.warm_start import warm_start_policy

    config = dataclasses.replace(policy_config_for(str(vlm_dir), device="cpu"), max_new_tokens=4)
    # without screenshots in its demonstrations the vision policy's SFT would stop at the first step
    version = warm_start_policy.fn(WarmStartConfig(updates=2, batch_size=2, episodes_per_task=1), config)
    policy = load_policy(PolicyRegistry().fetch(str(version)).path, device="cpu")
    assert policy.config.vision and policy.processor is not None
    observation = SimDroidEnv(SimDroidEnvConfig(screenshots=True, ui_xml=False)).reset("general-train-0000")
    (out,) = policy.act([observation], greedy=True)
    assert out.token_count > 0 and out.logprob < 0
