"""Rank 0 with a follower it starts: the draw from the DuckDB replay is shared, the
priorities rank 0 writes back and the weights it would publish are the single-process ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from distrl_core.learner import Learner, LearnerConfig
from distrl_core.learner.learner import Draw, train_step
from distrl_core.policy import load_policy, save_policy
from storage.replay import Replay
from storage.replay_config import ReplaySettings
from storage.schema import steps_to_table
from storage.shards import ShardWriter, ShardWriterConfig
from storage.store import open_store
from tasks.learner import LearnerParams
from tasks.learner_ranks import LearnerRanks
from tests.learner.ddp_ranks import assert_same_weights, policy_state

CONFIG = {"micro_batch_size": 4, "critic_warmup_updates": 0, "entity_dropout": 0.0, "word_dropout": 0.0}


def replay_of(rows: list[dict], root: Path) -> Replay:
    """A DuckDB replay over a local store holding `rows` (one shard per episode), ingested."""
    store = open_store(str(root))
    with ShardWriter(store, ShardWriterConfig(pool="p", collector_id="c", flush_seconds=0)) as writer:
        for episode in sorted({r["episode_id"] for r in rows}):
            writer.add_episode(steps_to_table([r for r in rows if r["episode_id"] == episode]))
    replay = Replay(store, ReplaySettings(min_size_steps=1, samples_per_insert=None))
    replay.ingest()
    return replay


def _train(
    learner: Learner, replay: Replay, sample, out: Path, ranks: LearnerRanks | None = None
) -> np.ndarray:
    """One update on the replay's draw, its priorities written back; the published files in `out`."""
    written: list[np.ndarray] = []

    def write_back(slots: np.ndarray, priorities: np.ndarray) -> None:
        replay.update_priorities(slots, priorities)
        written.append(priorities)

    if ranks is None:
        train_step(learner, sample, write_back)
    else:
        ranks.train_step(sample, write_back)
    with learner.averaged() as policy:
        save_policy(policy, out)
    return written[0]


def test_a_follower_makes_rank_0_write_and_publish_the_single_process_update(
    episode_rows, make_policy, tmp_path
) -> None:
    save_policy(make_policy(), tmp_path / "v1")  # the version both learners resume from

    def draw_from(replay: Replay) -> Draw:
        batch = replay.sample(8, beta=0.4, seed=5)
        return Draw(batch.slots, batch.steps, batch.is_weights)

    single_replay = replay_of(episode_rows, tmp_path / "single")
    single = Learner(load_policy(tmp_path / "v1"), LearnerConfig(**CONFIG))
    want = _train(single, single_replay, lambda: draw_from(single_replay), tmp_path / "single-v2")

    replay = replay_of(episode_rows, tmp_path / "ddp")
    learner = Learner(load_policy(tmp_path / "v1"), LearnerConfig(**CONFIG))
    ranks = LearnerRanks.start(learner, 2)
    try:
        assert [p.args[2] for p in ranks.processes] == ["tasks.learner_follower"]  # started by rank 0
        got = _train(learner, replay, lambda: draw_from(replay), tmp_path / "ddp-v2", ranks)
    finally:
        ranks.close()
    assert [p.returncode for p in ranks.processes] == [0] and learner.parallel is None
    np.testing.assert_allclose(got, want, atol=1e-6)
    stored = replay.priorities_of(sorted({r["episode_id"] for r in episode_rows}))
    assert stored == pytest.approx(single_replay.priorities_of(list(stored)), abs=1e-6)
    published, reference = (policy_state(Learner(load_policy(tmp_path / v))) for v in ("ddp-v2", "single-v2"))
    assert_same_weights(published, reference, lr=learner.config.actor_lr, updates=1)  # one update
    start = policy_state(
        Learner(load_policy(tmp_path / "v1"))
    )  # the comparison can fail: the update moved them
    assert any(not torch.equal(value, start[name]) for name, value in reference.items())
    replay.close()
    single_replay.close()


def test_an_uneven_split_of_the_batch_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match=r"batch_size=10 does not divide by learner_processes=4.*e\.g\. 12"):
        LearnerParams(batch_size=10, learner_processes=4)
    assert LearnerParams().learner_processes == 1


def test_an_averaged_proximal_policy_is_refused_on_several_processes() -> None:
    from pydantic import ValidationError

    from tasks.learner import LearnerParams

    LearnerParams(
        algorithm="decoupled_ppo", learner_processes=2, learner_config={"proximal_policy": "update_start"}
    )
    with pytest.raises(ValidationError, match="use proximal_policy='update_start'"):
        LearnerParams(
            algorithm="decoupled_ppo", learner_processes=2, learner_config={"proximal_policy": "average"}
        )
