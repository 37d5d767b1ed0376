"""Two learners at once: two `distrl retrain` on one home both published (v3 and v4, both from v2)
and both wrote the same priority snapshot. Now the second learner of a replay waits for its lease
or refuses naming the first; a learner whose lease was taken over publishes and saves nothing; and
the registry never takes a second child of one parent from another run that overlapped."""

from __future__ import annotations

import json

import pytest

from storage.store import Store
from tests.reliability.conftest import fill


@pytest.fixture
def home(tmp_path, monkeypatch, local_store: Store) -> Store:
    monkeypatch.setenv("DISTRL_STORE_URI", local_store.uri)
    monkeypatch.setenv("DISTRL_MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("DISTRL_MLFLOW_CACHE_DIR", str(tmp_path / "policy-cache"))
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    monkeypatch.setenv("DISTRL_LEASE_WAIT_S", "0")
    return local_store


def _publish_start(registry, make_policy, tmp_path) -> int:
    from distrl_core.policy import save_policy

    run = registry.start_run("setup")
    save_policy(make_policy(), tmp_path / "v")
    return registry.publish(tmp_path / "v", run_id=run, tags={})


@pytest.mark.slow  # MLflow on SQLite: its migrations take ~10 s on 2 busy cores
def test_the_second_learner_of_a_replay_refuses_and_a_stale_one_is_taken_over(
    home: Store, make_policy, tmp_path, monkeypatch
) -> None:
    from storage.lease import LeaseHeld, LeaseLost
    from storage.registry import PolicyRegistry
    from tasks.learner import LearnerParams, checkpoint_replay, close_learner, open_learner, publish_policy

    fill(home, 4)
    registry = PolicyRegistry()
    start = _publish_start(registry, make_policy, tmp_path)
    monkeypatch.setenv("DISTRL_LEASE_TTL_S", "2")
    first = open_learner(LearnerParams(algorithm="aride"))
    lease_file = first.lease.path
    with pytest.raises(LeaseHeld, match=r"held by run none \(pid \d+ on .*\) until .* UTC"):
        open_learner(LearnerParams(algorithm="aride"))  # nothing opened: no run left RUNNING

    # The first learner stops renewing (a kill -9 would): the next one waits out the lease, takes over.
    first.lease._stop.set()
    first.lease._renewer.join(timeout=5)
    monkeypatch.setenv("DISTRL_LEASE_WAIT_S", "60")
    second = open_learner(LearnerParams(algorithm="aride"))
    with pytest.raises(LeaseLost):
        publish_policy.fn(first)
    with pytest.raises(LeaseLost):
        checkpoint_replay.fn(first)
    close_learner(first)  # saves no snapshot over the heir's, and leaves its lease alone
    assert json.loads(home.fs.cat_file(lease_file))["token"] == second.lease.token

    version = publish_policy.fn(second)
    assert version == start + 1 and registry.tags(version)["parent_version"] == str(start)
    close_learner(second)
    assert not home.fs.exists(lease_file)
    assert registry.versions() == [start, version]


@pytest.mark.slow
def test_a_parent_gets_no_second_child_from_an_overlapping_run(
    home: Store, make_policy, tmp_path, monkeypatch
) -> None:
    from distrl_core.policy import save_policy
    from storage.registry import PolicyRegistry, SiblingPublished

    registry = PolicyRegistry()
    parent = _publish_start(registry, make_policy, tmp_path)
    save_policy(make_policy(), tmp_path / "child")
    run_a, run_b = registry.start_run("learner-a"), registry.start_run("learner-b")

    # A and B both started from `parent` while it was the newest version.
    tags = {"parent_version": parent}
    child = registry.publish(tmp_path / "child", run_id=run_a, tags=tags, siblings_after=parent)
    with pytest.raises(SiblingPublished, match=rf"v{parent} already has child v{child}"):
        registry.publish(tmp_path / "child", run_id=run_b, tags=tags, siblings_after=parent)
    assert registry.versions() == [parent, child]
    # A's own next version from `parent` (a retried publish) is not a rival of itself.
    again = registry.publish(tmp_path / "child", run_id=run_a, tags=tags, siblings_after=parent)

    # Both pass the check before registering (a race): the later number is withdrawn.
    real = PolicyRegistry._refuse_siblings

    def racing(self, parent, after, *, run_id, below=None):
        if below is not None:
            real(self, parent, after, run_id=run_id, below=below)

    monkeypatch.setattr(PolicyRegistry, "_refuse_siblings", racing)
    with pytest.raises(SiblingPublished, match=r"withdrawn"):
        registry.publish(tmp_path / "child", run_id=run_b, tags=tags, siblings_after=parent)
    monkeypatch.undo()
    assert registry.versions() == [parent, child, again]

    # A later run (a nightly retrain from the same champion) knew of those children: allowed.
    run_c = registry.start_run("retrain-next-night")
    later = registry.publish(tmp_path / "child", run_id=run_c, tags=tags, siblings_after=again)
    assert registry.versions() == [parent, child, again, later]
