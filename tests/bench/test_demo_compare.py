"""bench.demo_compare: two bases' demo results paired by seed, and the errors that keep unlike runs apart."""

from __future__ import annotations

import json
import statistics

import pytest

from bench.demo_compare import main


def _demo(base: str | None, seeds: dict[int, tuple[float, float]], split: str = "test") -> dict:
    return {
        "benchmark": "demo_seeds",
        "base": base,
        "heldout_split": split,
        "runs": [
            {
                "seed": seed,
                "heldout_success_warm_start": warm,
                "heldout_success_final": final,
                "in_distribution_final": 0.9,
            }
            for seed, (warm, final) in seeds.items()
        ],
    }


def _words(seeds: dict[int, tuple[float, float, float]]) -> dict:
    """Per seed: (unseen-word share, no-unseen-word share, one template's success)."""
    return {
        "runs": [
            {
                "seed": seed,
                "final": {
                    "unseen_word": unseen,
                    "no_unseen_word": seen,
                    "templates": {"app-test-1": template},
                    "template_examples": {"app-test-1": "Can you get Fitness running?"},
                },
            }
            for seed, (unseen, seen, template) in seeds.items()
        ]
    }


def _write(tmp_path, name: str, document: dict) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


def test_differences_are_paired_over_the_seeds_both_sides_ran(tmp_path):
    reference = _write(
        tmp_path, "tiny.json", _demo(None, {0: (0.5, 0.8), 1: (0.6, 0.9), 2: (0.4, 0.7), 3: (0.5, 0.5)})
    )
    candidate = _write(tmp_path, "big.json", _demo("minilm", {0: (0.6, 0.6), 1: (0.5, 0.75), 2: (0.4, 0.65)}))
    out = tmp_path / "out" / "compare"
    assert main(["--reference", reference, "--candidate", candidate, "--out", str(out)]) == 0
    result = json.loads(out.with_suffix(".json").read_text())
    final = result["measures"]["final"]
    assert final["seeds"] == [0, 1, 2]  # seed 3 has no partner
    differences = [0.6 - 0.8, 0.75 - 0.9, 0.65 - 0.7]
    assert final["difference"]["mean"] == pytest.approx(statistics.mean(differences))
    assert final["reference"]["mean"] == pytest.approx(0.8)
    gain = result["measures"]["gain"]
    assert gain["difference"]["mean"] == pytest.approx(statistics.mean([0.0 - 0.3, 0.25 - 0.3, 0.25 - 0.3]))
    assert result["names"] == {"reference": "tiny", "candidate": "minilm"}
    assert out.with_suffix(".png").stat().st_size > 0


def test_word_measures_and_templates_are_compared_when_both_sides_bring_them(tmp_path):
    seeds = {0: (0.5, 0.8), 1: (0.6, 0.9)}
    reference = [
        _write(tmp_path, "tiny.json", _demo(None, seeds)),
        _write(tmp_path, "tiny_words.json", _words({0: (0.5, 0.9, 0.2), 1: (0.6, 1.0, 0.4)})),
    ]
    candidate = [
        _write(tmp_path, "big.json", _demo("minilm", seeds)),
        _write(tmp_path, "big_words.json", _words({0: (0.7, 0.8, 0.9), 1: (0.8, 0.8, 0.7)})),
    ]
    out = tmp_path / "compare"
    main(["--reference", *reference, "--candidate", *candidate, "--out", str(out)])
    measures = json.loads(out.with_suffix(".json").read_text())["measures"]
    assert measures["word_gap"]["reference"]["mean"] == pytest.approx(0.4)
    assert measures["word_gap"]["candidate"]["mean"] == pytest.approx(0.05)
    assert measures["word_gap"]["difference"]["mean"] == pytest.approx(-0.35)
    assert measures["template:app-test-1"]["difference"]["mean"] == pytest.approx(0.5)


def test_sides_scored_on_different_splits_are_refused(tmp_path, capsys):
    reference = _write(tmp_path, "tiny.json", _demo(None, {0: (0.5, 0.8)}, split="validation_words"))
    candidate = _write(tmp_path, "big.json", _demo("minilm", {0: (0.5, 0.8)}))
    with pytest.raises(SystemExit):
        main(["--reference", reference, "--candidate", candidate, "--out", str(tmp_path / "x")])
    assert "different splits (test, validation_words)" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_a_file_that_is_not_a_demo_result_is_named(tmp_path, capsys):
    words = _write(tmp_path, "words.json", _words({0: (0.5, 0.9, 0.2)}))
    candidate = _write(tmp_path, "big.json", _demo("minilm", {0: (0.5, 0.8)}))
    with pytest.raises(SystemExit):
        main(["--reference", words, "--candidate", candidate, "--out", str(tmp_path / "x")])
    assert "words.json is not a bench.demo_seeds result" in capsys.readouterr().err
