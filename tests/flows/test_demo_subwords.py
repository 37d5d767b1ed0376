"""`distrl demo --base tiny-minilm` runs end to end: the warm start, collectors and the evaluator act
with the tiny model on an encoder's sub-words, and every version they load is that design."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.replay_config import ReplaySettings
from tasks.learner import LearnerParams
from tests.policy.subword_encoder import write_small_encoder


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_tiny_minilm_demo_trains_and_publishes_sub_word_versions(
    demo_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from distrl_core.policy import load_policy, pretrained
    from flows.train_local_params import TrainLocalParams, heldout_split
    from ops.demo import run_demo
    from storage.registry import PolicyRegistry
    from tasks.evaluator import EvaluatorParams

    encoder = write_small_encoder(tmp_path / "encoder", seed=0)
    prepared = pretrained.ConvertedModel(encoder, encoder, False, 0)
    monkeypatch.setitem(pretrained.PACKAGED_BASES, "minilm", lambda: prepared)  # stands for MiniLM
    selection = "validation_unseen"
    params = TrainLocalParams(
        base="tiny-minilm",
        validation=True,
        validation_split=selection,
        collectors=2,
        envs_per_collector=4,
        minutes=3.0,  # a ceiling: the run ends when the learner has done max_updates
        warm_start_updates=5,
        step_latency_s=0.02,
        learner=LearnerParams(updates_per_block=2, publish_every_updates=2, batch_size=4, max_updates=4),
        replay=ReplaySettings(min_size_steps=20, samples_per_insert=None),
        evaluator_process=False,
        evaluator=EvaluatorParams(
            split=heldout_split(TrainLocalParams(validation=True, validation_split=selection)),
            episodes_per_task=1,
            poll_seconds=1.0,
        ),
    )
    summary = run_demo(params, root=str(demo_root))

    assert summary["final_version"] > 1
    registry = PolicyRegistry()
    for version in (1, summary["final_version"]):  # the warm start and what the learner published
        policy = load_policy(registry.fetch(str(version)).path, device="cpu")
        assert policy.config.subwords is not None
        assert policy.config.subwords.source == str(encoder.resolve())
        assert not policy.model.get_input_embeddings().weight.requires_grad
        assert len(policy.tokenizer) == policy.model.get_input_embeddings().num_embeddings
