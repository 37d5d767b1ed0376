"""The learner on two processes (gloo, CPU) makes the single-process update: the same parameters,
losses, priorities and published (averaged) weights, to 1e-6."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from distrl_core.learner import Learner, LearnerConfig
from distrl_core.learner.distributed import batch_split_problem, shard_rows
from tests.learner.ddp_ranks import SHIFT_ONLY, assert_same_weights, policy_state, rank_main, train

# Micro-batches of batch/2 trajectories: the single-process learner cuts the batch where the
# ranks' shards meet, so per-micro-batch statistics (advantage normalisation) match. The first
# update trains the critics only (warm-up), the second the actor too. No word dropout: its masks
# are random, and each rank draws its own.
CONFIG = {"micro_batch_size": 4, "critic_warmup_updates": 1, "entity_dropout": 0.0, "word_dropout": 0.0}
UPDATES = 2


def test_shards_are_equal_slices_and_an_uneven_split_names_the_fix() -> None:
    assert [shard_rows(8, r, 2) for r in (0, 1)] == [range(4), range(4, 8)]
    assert batch_split_problem(16, 4) is None
    problem = batch_split_problem(10, 4)
    assert problem is not None and "learner_processes=4" in problem and "e.g. 12" in problem
    with pytest.raises(ValueError, match="multiple of 4"):
        shard_rows(10, 0, 4)


# gigpo: critic-free (DDP must leave the unused critic heads alone), advantages over the union batch.
@pytest.mark.parametrize("algorithm", ["aride", "gigpo"])
def test_two_processes_make_the_single_process_update(episode_rows, make_policy, tmp_path, algorithm) -> None:
    rows = episode_rows  # 8 real SimDroid episodes
    is_weights = np.linspace(0.4, 1.0, 8)
    config = CONFIG | {"algorithm": algorithm}
    mp.spawn(
        rank_main,
        args=(2, f"file://{tmp_path / 'rendezvous'}", rows, is_weights, config, UPDATES, str(tmp_path)),
        nprocs=2,
    )
    single = Learner(make_policy(), LearnerConfig(**config))
    expected = train(single, rows, is_weights, UPDATES)
    reference = policy_state(single)
    for rank in (0, 1):
        got = torch.load(tmp_path / f"rank{rank}.pt", weights_only=False)
        for (metrics, priorities), (want_metrics, want_priorities) in zip(
            got["results"], expected, strict=True
        ):
            assert metrics.keys() == want_metrics.keys()
            for name in sorted(set(want_metrics) - {"update_s"}):  # losses, stats, gradient norms, lag
                assert metrics[name] == pytest.approx(want_metrics[name], abs=1e-6), name
            np.testing.assert_allclose(priorities, want_priorities, atol=1e-6)
        assert got["results"][1][0]["actor_trained"] == 1.0  # the second update moved the actor
        assert_same_weights(got["state"], reference, lr=single.config.actor_lr, updates=UPDATES)
    # The comparison can fail: the update did move the weights it compares.
    assert any(
        not torch.equal(value, start)
        for value, start in zip(
            reference.values(), policy_state(Learner(make_policy())).values(), strict=True
        )
    )


def test_the_score_heads_last_bias_cannot_change_a_log_probability(episode_rows, make_policy) -> None:
    """Why `assert_same_weights` lets that one bias differ by rounding: a constant added to every
    candidate's score leaves every log-probability and entropy as it was."""
    from distrl_core.learner.batch import StepBatch

    policy = make_policy()
    steps = StepBatch.from_rows(episode_rows, np.ones(8)).steps
    with torch.no_grad():
        before = policy.evaluate_steps(steps)
        bias = dict(policy.heads.named_parameters())[SHIFT_ONLY.removeprefix("heads.")]
        bias.add_(5.0)
        after = policy.evaluate_steps(steps)
    assert len(before["logp"]) > 8
    for name in ("logp", "entropy"):
        torch.testing.assert_close(after[name], before[name], atol=1e-5, rtol=0, msg=name)
