"""Step rows become padded (B, T) trajectories in the right order."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
import torch

from distrl_core.learner.batch import StepBatch
from storage.schema import steps_to_table


def test_rows_in_any_order_become_ordered_trajectories(episode_rows):
    shuffled = list(episode_rows)
    random.Random(0).shuffle(shuffled)
    batch = StepBatch.from_rows(shuffled)
    assert batch.size == 8
    lengths = batch.mask.sum(dim=1)
    assert int(lengths.sum()) == len(episode_rows) == batch.num_steps
    for b in range(batch.size):
        n = int(lengths[b])
        assert bool(batch.mask[b, :n].all()) and not bool(batch.mask[b, n:].any())
        assert batch.dones[b, n - 1] == 1 and float(batch.dones[b, : n - 1].sum()) == 0
        first = batch.steps[int(batch.row_first[b])]
        assert first.history == ()
        assert batch.steps[int(batch.row_first[b]) + n - 1].history == tuple(
            s.action for s in batch.steps[int(batch.row_first[b]) : int(batch.row_first[b]) + n - 1]
        )
    assert batch.history_complete


def test_sample_idx_groups_draws_and_keeps_duplicates(episode_rows):
    table = steps_to_table(episode_rows)
    episode_ids = sorted(set(table.column("episode_id").to_pylist()))
    picks = [episode_ids[2], episode_ids[0], episode_ids[2]]  # one trajectory drawn twice
    parts = []
    for draw, episode in enumerate(picks):
        rows = table.filter(pa.compute.equal(table.column("episode_id"), episode))
        parts.append(rows.append_column("sample_idx", pa.array([draw] * rows.num_rows, pa.int64())))
    batch = StepBatch.from_rows(pa.concat_tables(parts), is_weights=[1.0, 0.5, 0.25])
    assert batch.episode_ids == picks
    assert torch.equal(batch.is_weights, torch.tensor([1.0, 0.5, 0.25]))
    assert torch.equal(batch.mask[0], batch.mask[2])
    with pytest.raises(ValueError, match="is_weights has 2 entries"):
        StepBatch.from_rows(pa.concat_tables(parts), is_weights=[1.0, 1.0])


def test_repeat_flags_an_action_taken_again_on_an_unchanged_screen(episode_rows):
    rows = [dict(r) for r in episode_rows if r["episode_id"] == episode_rows[0]["episode_id"]][:3]
    rows[1].update(observation_text=rows[0]["observation_text"], action=rows[0]["action"])
    rows[2].update(observation_text="something else", action=rows[0]["action"])
    batch = StepBatch.from_rows(rows)
    assert batch.repeat[0, :3].tolist() == [0.0, 1.0, 0.0]


def test_windows_mark_the_history_incomplete_and_missing_columns_are_named(episode_rows):
    late = [r for r in episode_rows if r["step"] >= 1]
    assert not StepBatch.from_rows(late).history_complete
    broken = [{k: v for k, v in r.items() if k != "behaviour_logprob"} for r in episode_rows]
    with pytest.raises(ValueError, match="behaviour_logprob"):
        StepBatch.from_rows(broken)
