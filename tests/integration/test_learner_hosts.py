"""Learner ranks on two hosts (network namespaces): rank 0 here, a follower that another host's
launcher starts; the updates equal one process's, and a follower killed mid-run is restarted by its
launcher, rejoins, and the interrupted update is trained again — still equal to one process."""

from __future__ import annotations

import pytest

from bench import netns
from bench.learner_hosts import two_hosts
from distrl_core.learner import LearnerConfig
from tests.learner.ddp_ranks import adam_bound


@pytest.mark.slow
@pytest.mark.netns
def test_a_follower_on_another_host_trains_exactly_and_recovers_from_a_kill() -> None:
    reason = netns.unavailable()
    if reason is not None:
        pytest.skip(f"network namespaces unavailable: {reason}")
    run = two_hosts(updates=3, kill_before=1)
    assert run["lost_ranks_seen"] >= 1  # the kill was felt: rank 0 formed the group again
    assert run["group_sizes"] == [2, 2, 2]  # the restarted follower rejoined; no update went alone
    assert run["priorities_written"] == 3  # the interrupted update wrote its priorities once
    assert run["max_priority_diff"] <= 1e-6 and run["max_weight_diff"] <= 1e-6, run
    assert run["shift_only_bias_diff"] <= adam_bound(LearnerConfig().actor_lr, 3), run
    assert run["weights_moved"] and run["launcher_exit"] == 0
