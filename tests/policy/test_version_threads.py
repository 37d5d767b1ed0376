"""Collectors load new versions from threads: loading must not race on torch's global RNG."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import torch

from distrl_core.policy import load_policy, save_policy


def test_concurrent_loads_of_a_tiny_version_all_pass_the_base_check(make_policy, tmp_path):
    policy = make_policy()
    with torch.no_grad():
        for parameter in policy.actor_parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))  # trained weights, not the seed's
    save_policy(policy, tmp_path / "v")
    expected = {k: v.clone() for k, v in policy.model.state_dict().items()}

    # Without the build lock, interleaved seeded initialisations make the fresh base hash differ.
    with ThreadPoolExecutor(max_workers=6) as pool:
        loaded = list(pool.map(lambda _: load_policy(tmp_path / "v", device="cpu"), range(6)))

    for copy in loaded:
        state = copy.model.state_dict()
        assert all(torch.equal(state[k], expected[k]) for k in expected)


def test_loads_pass_the_base_check_while_another_thread_draws_from_the_global_rng(make_policy, tmp_path):
    # The learner's dropout and the collectors draw from torch's global generator while a collector
    # loads a new version: the fresh tiny base must not depend on those draws.
    import threading

    policy = make_policy()
    save_policy(policy, tmp_path / "v")
    expected = {k: v.clone() for k, v in policy.model.state_dict().items()}
    stop, drawing = threading.Event(), threading.Event()
    draws = 0

    def draw() -> None:
        nonlocal draws
        while not stop.is_set():
            torch.rand(64)
            draws += 1
            drawing.set()

    drawer = threading.Thread(target=draw)
    drawer.start()
    try:
        assert drawing.wait(timeout=60)
        before = draws
        loaded = [load_policy(tmp_path / "v", device="cpu") for _ in range(8)]
        during = draws - before
    finally:
        stop.set()
        drawer.join()
    assert during > 0, "the other thread drew nothing while the versions loaded"
    for copy in loaded:  # each load passed the base check and holds the saved weights
        assert copy.base.hash == policy.base.hash
        state = copy.model.state_dict()
        assert state.keys() == expected.keys()
        assert all(torch.equal(state[k], expected[k]) for k in expected)
