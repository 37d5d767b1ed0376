"""Collectors of one process build each published version once and act with copies of their own."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

import pytest
import torch

import distrl_core.policy.version as policy_version
from distrl_core.policy import load_policy, save_policy
from distrl_core.policy.config import PolicyConfig
from distrl_core.policy.model import Policy
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from storage.registry import PolicyRegistry
from tasks.collector import CollectorParams, close_collector, load_policy_version, open_collector
from tasks.policy_cache import templates


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DISTRL_STORE_URI", str(tmp_path / "store"))
    monkeypatch.setenv("DISTRL_MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("DISTRL_MLFLOW_CACHE_DIR", str(tmp_path / "policy-cache"))
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    templates.clear()
    yield tmp_path
    templates.clear()


def _publish(seed: int) -> int:
    registry = PolicyRegistry()
    with tempfile.TemporaryDirectory() as tmp:
        path = save_policy(Policy.create(PolicyConfig(seed=seed)), Path(tmp) / "policy")
        return registry.publish(path, run_id=registry.start_run("test"))


def _count_builds(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    built: list[Path] = []
    real = policy_version._build

    def counted(directory, *args, **kwargs):
        built.append(directory)
        return real(directory, *args, **kwargs)

    monkeypatch.setattr(policy_version, "_build", counted)
    return built


def test_collectors_in_one_process_build_a_version_once(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    version = _publish(seed=3)
    built = _count_builds(monkeypatch)
    sessions = [open_collector(CollectorParams(collector_id=f"c{i}", num_envs=1)) for i in range(4)]
    try:
        threads = [threading.Thread(target=load_policy_version.fn, args=(s, version)) for s in sessions]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(built) == 1  # one build from the files; the other collectors got copies
        policies = [s.policy for s in sessions]
        assert len({id(p) for p in policies}) == 4  # each collector owns its policy...
        assert len({id(p.generator) for p in policies if p is not None}) == 4  # ...and its sampling stream

        # A copy acts exactly as a fresh build of the version: same weights, same sampled actions.
        observations = [
            SimDroidEnv(SimDroidEnvConfig()).reset(f"general-train-{i:04d}", seed=i) for i in range(4)
        ]
        fresh = load_policy(PolicyRegistry().fetch(version).path).eval()
        copied = sessions[1].policy
        assert copied is not None
        with torch.no_grad():
            for _ in range(3):
                assert [(a.raw_text, round(a.logprob, 5)) for a in copied.act(observations)] == [
                    (a.raw_text, round(a.logprob, 5)) for a in fresh.act(observations)
                ]
        assert len(built) == 2  # the fresh build above

        # A newer version is built once more; the previous one is still kept, not built again.
        newer = _publish(seed=4)
        load_policy_version.fn(sessions[0], newer)
        load_policy_version.fn(sessions[1], newer)
        load_policy_version.fn(sessions[2], version)
        assert len(built) == 3
        assert sessions[0].version == newer and sessions[2].version == version
    finally:
        for session in sessions:
            close_collector(session)
