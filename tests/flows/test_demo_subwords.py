"""`distrl demo --base tiny-minilm` (and the demo's default, `tiny-minilm-words-values`) runs end to end:
the warm start, collectors and the evaluator act with the tiny model on an encoder's sub-words
(reading its similarity of each app icon and control route to the instruction), and every version
they load is that design."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.flows.conftest import small_validation_demo
from tests.policy.subword_encoder import write_small_encoder


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("base", ["tiny-minilm", "tiny-minilm-words-values"])
def test_a_tiny_minilm_demo_trains_and_publishes_sub_word_versions(
    base: str, demo_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from distrl_core.policy import load_policy, pretrained
    from distrl_core.policy.semantic_match import NEUTRAL
    from distrl_core.policy.vocabulary import app_labels, control_paths, value_paths
    from ops.demo import run_demo
    from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
    from simulators.simdroid.tasks import load_tasks
    from storage.registry import PolicyRegistry

    encoder = write_small_encoder(tmp_path / "encoder", seed=0)
    prepared = pretrained.ConvertedModel(encoder, encoder, False, 0)
    monkeypatch.setitem(pretrained.PACKAGED_BASES, "minilm", lambda: prepared)  # stands for MiniLM
    selection = "validation_unseen"
    params = small_validation_demo(selection, base=base)
    summary = run_demo(params, root=str(demo_root))

    assert summary["final_version"] > 1
    registry = PolicyRegistry()
    launcher = SimDroidEnv(SimDroidEnvConfig(screenshots=False)).reset(
        load_tasks("general", "train")[0], seed=0
    )
    for version in (1, summary["final_version"]):  # the warm start and what the learner published
        policy = load_policy(registry.fetch(str(version)).path, device="cpu")
        assert policy.config.subwords is not None
        assert policy.config.subwords.source == str(encoder.resolve())
        assert not policy.model.get_input_embeddings().weight.requires_grad
        assert len(policy.tokenizer) == policy.model.get_input_embeddings().num_embeddings
        scoped = policy.config.subwords.semantic_labels
        assert scoped == (app_labels() if base == "tiny-minilm-words-values" else ())
        assert policy.config.subwords.semantic_paths == (control_paths() if scoped else ())
        assert policy.config.subwords.semantic_value_paths == (value_paths() if scoped else ())
        assert policy.config.subwords.pool_words is bool(scoped)
        assert (policy.heads.semantic is not None) is bool(scoped)
        if scoped:  # a launcher page: its app icons carry the feature, nothing else does
            step = policy.encode("check my email", launcher.ui_text)
            assert step.semantic is not None and any(index != NEUTRAL for index in step.semantic)
            assert all(step.semantic[i] == NEUTRAL for i in range(step.instruction_end + 1))
