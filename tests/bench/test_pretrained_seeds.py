"""bench.pretrained_seeds: bench.pretrained runs paired by seed, and the errors that keep runs apart."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from bench.pretrained_seeds import runs_by_seed, summarise


def _run(model: str, heldout: float, rl_updates: int = 10) -> dict:
    return {
        "model": model,
        "base": "models/all-minilm-l6-v2" if model == "pretrained" else None,
        "device": "cuda",
        "final_heldout_success": heldout,
        "rl_updates": rl_updates,
        "warm_start": {"updates": 5},
    }


def _file(tmp_path: Path, name: str, seed: int, *runs: dict) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"args": {"seed": seed}, "machine": {}, "results": list(runs)}))
    return path


def test_pairs_by_seed_across_files_and_takes_the_differences(tmp_path):
    files = [
        _file(tmp_path, "both.json", 0, _run("tiny", 0.5), _run("pretrained", 0.8)),
        _file(tmp_path, "s1_tiny.json", 1, _run("tiny", 0.6)),
        _file(tmp_path, "s1_pretrained.json", 1, _run("pretrained", 0.7)),
        _file(tmp_path, "s2_tiny_only.json", 2, _run("tiny", 0.9)),  # unpaired: left out
    ]
    document = summarise(runs_by_seed(files))
    assert [row["seed"] for row in document["seeds"]] == [0, 1]
    assert [round(row["difference"], 6) for row in document["seeds"]] == [0.3, 0.1]
    difference = document["summary"]["difference"]
    assert difference["mean"] == pytest.approx(0.2)
    half = 12.706 * statistics.stdev([0.3, 0.1]) / 2**0.5  # t_{0.975, 1}
    assert difference["ci95"] == pytest.approx([0.2 - half, 0.2 + half])
    assert document["seeds"][1]["files"] == sorted(str(f) for f in files[1:3])


def test_a_seed_run_twice_for_one_model_is_refused(tmp_path):
    files = [_file(tmp_path, f"{i}.json", 0, _run("tiny", 0.5)) for i in range(2)]
    with pytest.raises(SystemExit, match="seed 0 has a second tiny run"):
        runs_by_seed(files)


def test_fewer_than_two_paired_seeds_is_refused(tmp_path):
    files = [_file(tmp_path, "a.json", 0, _run("tiny", 0.5), _run("pretrained", 0.6))]
    with pytest.raises(SystemExit, match="need both models on >= 2 seeds"):
        summarise(runs_by_seed(files))
