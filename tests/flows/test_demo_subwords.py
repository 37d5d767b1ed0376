"""`distrl demo --base tiny-minilm` runs end to end: the warm start, collectors and the evaluator act
with the tiny model on an encoder's sub-words, and every version they load is that design."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.flows.conftest import small_validation_demo
from tests.policy.subword_encoder import write_small_encoder


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_tiny_minilm_demo_trains_and_publishes_sub_word_versions(
    demo_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from distrl_core.policy import load_policy, pretrained
    from ops.demo import run_demo
    from storage.registry import PolicyRegistry

    encoder = write_small_encoder(tmp_path / "encoder", seed=0)
    prepared = pretrained.ConvertedModel(encoder, encoder, False, 0)
    monkeypatch.setitem(pretrained.PACKAGED_BASES, "minilm", lambda: prepared)  # stands for MiniLM
    selection = "validation_unseen"
    params = small_validation_demo(selection, base="tiny-minilm")
    summary = run_demo(params, root=str(demo_root))

    assert summary["final_version"] > 1
    registry = PolicyRegistry()
    for version in (1, summary["final_version"]):  # the warm start and what the learner published
        policy = load_policy(registry.fetch(str(version)).path, device="cpu")
        assert policy.config.subwords is not None
        assert policy.config.subwords.source == str(encoder.resolve())
        assert not policy.model.get_input_embeddings().weight.requires_grad
        assert len(policy.tokenizer) == policy.model.get_input_embeddings().num_embeddings
