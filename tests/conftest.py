"""Suite-wide settings and fixtures: nothing downloads, nothing reads the developer's own config.

The policy fixtures are shared by tests/policy and tests/learner (and anything else that needs a
real tiny policy or real SimDroid rows); their imports stay inside the fixtures so that collecting
a storage or env test does not pay for torch and transformers.
"""

from __future__ import annotations

import os
from pathlib import Path

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


# Seconds of the test files that take 10 s or more (tests/suite_seconds.txt: `seconds path` lines).
_FILE_SECONDS = Path(__file__).with_name("suite_seconds.txt")


def _file_seconds() -> dict[str, float]:
    lines = _FILE_SECONDS.read_text().splitlines() if _FILE_SECONDS.exists() else []
    pairs = (line.split(maxsplit=1) for line in lines if line.strip() and not line.startswith("#"))
    return {path: float(seconds) for seconds, path in pairs}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the suite for `make test`'s pytest-xdist workers (`--dist loadfile
    --no-loadscope-reorder`; docs/performance.md, "The test suite").

    - A file's tests run on one worker (`loadfile`), so a module-scoped fixture (a server stack, a
      trained policy) is built once, as in a serial run.
    - The longest files go first (longest processing time first), by the seconds each took in a
      recorded run (tests/suite_seconds.txt), so that the short ones fill the gaps at the end
      instead of one worker finishing a five-minute run alone. Files not listed follow: their slow
      tests first, the multi-process `integration` runs first of all. xdist hands the files out in
      the order of their first test here (`--no-loadscope-reorder`: by default it re-sorts them by
      their number of tests, the longest runs, one test each, last).
    - The tests that build network namespaces run side by side like any other: each takes its
      subnet under `bench.netns.subnet_lock`, so two never pick the same one.
    """
    seconds = _file_seconds()

    def rank(item: pytest.Item) -> tuple[float, str, bool, bool]:
        file = item.nodeid.partition("::")[0]
        slow, integration = item.get_closest_marker("slow"), item.get_closest_marker("integration")
        listed = file if file in seconds else ""  # a listed file's tests stay together
        return -seconds.get(file, 0.0), listed, slow is None, integration is None

    items.sort(key=rank)  # stable: file order within a rank
