"""Suite-wide settings and fixtures: nothing downloads, nothing reads the developer's own config.

The policy fixtures are shared by tests/policy and tests/learner (and anything else that needs a
real tiny policy or real SimDroid rows); their imports stay inside the fixtures so that collecting
a storage or env test does not pay for torch and transformers.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# One torch thread: on a loaded 2-core machine it trains several times faster than two
# (docs/performance.md, "Threads").
os.environ.setdefault("OMP_NUM_THREADS", "1")


def _rollout_rows(tokenizer, tasks: list[str], *, seed: int, policy_version: int = 0) -> list[dict]:
    """Step rows of real SimDroid episodes played by a fresh (random-weight) tiny policy."""
    from distrl_core.policy import Policy, PolicyConfig
    from simulators.rollout import RolloutConfig, run_episodes
    from simulators.sim_env import SimDroidEnvConfig

    policy = Policy.create(PolicyConfig(device="cpu"), tokenizer=tokenizer)
    env = SimDroidEnvConfig(screenshots=False, ui_xml=False)
    config = RolloutConfig(env=env, parallel_envs=len(tasks), seed=seed, policy_version=policy_version)
    return run_episodes(policy, tasks, config).rows


@pytest.fixture(scope="session")
def tokenizer():
    """The default word tokenizer, built once per session (a couple of seconds)."""
    from distrl_core.policy import default_tokenizer

    return default_tokenizer()


@pytest.fixture
def make_policy(tokenizer):
    """Factory of fresh tiny policies on CPU: ``make_policy(mode="generative", ...)``."""
    from distrl_core.policy import Policy, PolicyConfig

    def make(**overrides) -> Policy:
        return Policy.create(PolicyConfig(device="cpu", **overrides), tokenizer=tokenizer)

    return make


@pytest.fixture(scope="session")
def episode_rows(tokenizer):
    """Rows of 8 real episodes (general and webshop, train split) from a fresh policy, version 3."""
    tasks = [f"general-train-{i:04d}" for i in (0, 31, 62, 93, 124)]
    tasks += ["webshop-train-0000", "webshop-train-0070", "webshop-train-0120"]
    return _rollout_rows(tokenizer, tasks, seed=11, policy_version=3)


@pytest.fixture(scope="session")
def sim_rows(tokenizer):
    """Rows of 4 real episodes, one of them from the held-out split."""
    tasks = ["general-train-0000", "general-train-0040", "webshop-train-0100", "general-test-0060"]
    return _rollout_rows(tokenizer, tasks, seed=3)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order and group the suite for `make test`'s two pytest-xdist workers (`--dist loadgroup`).

    - The slow tests go first, the real multi-process runs (`integration`, minutes each) first of
      all, so that the short ones fill the gaps at the end instead of one worker finishing a long
      run alone.
    - A file's tests run on one worker, so a module-scoped fixture (a server stack, a trained
      policy) is built once, as in a serial run.
    - The tests that build network namespaces run side by side like any other: each takes its
      subnet under `bench.netns.subnet_lock`, so two never pick the same one.
    """

    def rank(item: pytest.Item) -> tuple[bool, bool]:
        return item.get_closest_marker("slow") is None, item.get_closest_marker("integration") is None

    items.sort(key=rank)  # stable: file order within a rank
    for item in items:
        item.add_marker(pytest.mark.xdist_group(item.nodeid.partition("::")[0]))
