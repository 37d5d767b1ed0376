"""A-RIDE improves held-out success over its warm start, on five seeds (a statistic, not one lucky run).

Each seed warm-starts its own policy (initial weights, demonstrations and batch order all from the
seed) to a weak held-out success, then runs the in-process loop; the assertion is on the five
seeds together. Two worker processes, one torch thread each: ~4 minutes on 2 cores. A mutation
that flips the advantage's sign or inverts the importance ratio makes it fail (checked by hand when
it was written, and by `python -m bench.mutations`).
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import pytest

SEEDS = (0, 1, 2, 3, 4)
ROUNDS = 14


def _run_seed(seed: int) -> dict:
    import torch

    torch.set_num_threads(1)
    from distrl_core.learner import Learner, LearnerConfig
    from distrl_core.policy import Policy, PolicyConfig
    from distrl_core.policy.config import TinyModelConfig
    from simulators.local_loop import LoopConfig, train_rounds
    from simulators.simdroid.tasks import load_tasks
    from simulators.warm_start import WarmStartConfig, collect_demonstrations, supervised_warm_start

    policy = Policy.create(PolicyConfig(device="cpu", seed=seed, tiny=TinyModelConfig(seed=seed)))
    warm = WarmStartConfig(family="general", noise=0.3, updates=20, seed=seed)
    supervised_warm_start(policy, collect_demonstrations(warm).rows, warm)
    loop = LoopConfig(family="general", rounds=ROUNDS, episodes_per_round=32, updates_per_round=8, seed=seed)
    rounds = train_rounds(Learner(policy, LearnerConfig(algorithm="aride", seed=seed)), loop)
    return {
        "seed": seed,
        "start": rounds[0].heldout_success,
        "late": sum(r.heldout_success for r in rounds[-3:]) / 3,
        "curve": [r.heldout_success for r in rounds],
        "rho_mean": rounds[-1].metrics["rho_mean"],
        "policy_lag_max": rounds[-1].metrics["policy_lag_max"],
        "test_tasks": len(load_tasks("general", "test")),
    }


@pytest.mark.slow
@pytest.mark.timeout(1800)  # ~3 minutes on 2 idle cores; a loaded machine can take several times that
def test_aride_raises_heldout_success_over_the_warm_start_on_five_seeds():
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        runs = list(pool.map(_run_seed, SEEDS))
    gains = [run["late"] - run["start"] for run in runs]
    report = [(run["seed"], round(run["start"], 3), round(run["late"], 3)) for run in runs]
    assert all(run["start"] < 0.5 for run in runs), report  # weak warm starts, far from what RL reaches
    assert sum(gains) / len(gains) > 0.10, report
    assert sum(gain > 0.03 for gain in gains) >= 4, report
    assert all(run["rho_mean"] > 0 for run in runs)  # it trained off-policy data from earlier versions
    assert all(run["policy_lag_max"] >= 1 for run in runs)
