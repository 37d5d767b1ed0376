"""`encoder_layers`: how many of an encoder base's top layers a run trains (0: the heads alone), and
`encoder_candidates`: how it reads a candidate, from `distrl demo --encoder-layers/--encoder-candidates`
through TrainLocalParams to the policy's config; refused where they cannot apply (the tiny model, a
LoRA base) instead of being ignored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from distrl_core.policy.config import policy_config_for
from flows.train_local_params import TrainLocalParams


def _folder(tmp_path: Path, model_type: str) -> str:
    folder = tmp_path / model_type
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": model_type}))
    return str(folder)


def test_an_encoder_base_trains_the_layers_asked_for(tmp_path: Path) -> None:
    encoder = _folder(tmp_path, "bert")
    assert policy_config_for(encoder).encoder.trainable_layers == 1  # the default: the top layer
    for layers in (0, 3):
        config = policy_config_for(encoder, seed=2, encoder_layers=layers)
        assert config.encoder.trainable_layers == layers and config.seed == 2


def test_encoder_layers_is_refused_where_it_cannot_apply(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not the tiny model"):
        policy_config_for(None, encoder_layers=0)
    with pytest.raises(ValueError, match="causal LM adapted with LoRA"):
        policy_config_for(_folder(tmp_path, "llama"), encoder_layers=0)
    with pytest.raises(ValidationError, match="encoder_layers applies to an encoder base"):
        TrainLocalParams(encoder_layers=0)
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        TrainLocalParams(base="minilm", encoder_layers=-1)
    assert TrainLocalParams(base="minilm", encoder_layers=0).encoder_layers == 0


def test_an_encoder_base_reads_candidates_as_asked_and_nothing_else_accepts_it(tmp_path: Path) -> None:
    encoder = _folder(tmp_path, "bert")
    assert policy_config_for(encoder).encoder.candidates == "pooled"  # saved policies keep reading so
    assert policy_config_for(encoder, encoder_candidates="spans").encoder.candidates == "spans"
    with pytest.raises(ValueError, match="not the tiny model"):
        policy_config_for(None, encoder_candidates="spans")
    with pytest.raises(ValueError, match="causal LM adapted with LoRA"):
        policy_config_for(_folder(tmp_path, "llama"), encoder_candidates="spans")
    with pytest.raises(ValueError, match=r"EncoderSettings\.candidates must be one of"):
        policy_config_for(encoder, encoder_candidates="joint")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="encoder_candidates applies to an encoder base"):
        TrainLocalParams(encoder_candidates="spans")
    with pytest.raises(ValidationError, match="encoder_candidates"):
        TrainLocalParams(base="minilm", encoder_candidates="joint")
    assert TrainLocalParams(base="minilm", encoder_candidates="spans").encoder_candidates == "spans"
