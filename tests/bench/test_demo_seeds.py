"""bench/demo_seeds' arithmetic (which seeds count as a separated gain, the summary over seeds) and
its settings (what each demo runs with, where its runs are kept and its result written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench._common import write_result
from bench.demo_seeds import (
    DemoSettings,
    kept_run,
    out_name,
    parse_args,
    separated_gain,
    settings_of,
    summarise,
)


def _run(warm: float, warm_ci: tuple[float, float], final: float, final_ci: tuple[float, float]) -> dict:
    return {
        "heldout_success_warm_start": warm,
        "heldout_ci_warm_start": list(warm_ci),
        "heldout_success_final": final,
        "heldout_ci_final": list(final_ci),
    }


def test_a_seed_counts_when_it_gains_enough_with_disjoint_intervals() -> None:
    assert separated_gain(_run(0.40, (0.33, 0.47), 0.60, (0.53, 0.67)), 0.15)
    assert not separated_gain(_run(0.40, (0.33, 0.47), 0.52, (0.45, 0.59)), 0.15)  # too small a gain
    assert not separated_gain(_run(0.40, (0.30, 0.55), 0.56, (0.50, 0.62)), 0.15)  # intervals overlap


def test_the_summary_is_the_mean_gain_over_seeds_with_its_interval() -> None:
    runs = [_run(0.4, (0.33, 0.47), 0.6, (0.53, 0.67)), _run(0.5, (0.43, 0.57), 0.6, (0.53, 0.67))]
    summary = summarise(runs, 0.15)
    assert summary["gain"]["mean"] == pytest.approx(0.15)
    assert summary["seeds_meeting_target"] == 1
    assert summary["final"]["mean"] == pytest.approx(0.6)


def test_validation_and_bases_are_passed_to_the_demo_and_kept_apart() -> None:
    test_runs = settings_of(parse_args(["--warm-start-updates", "300"]))
    assert test_runs.folder() == "ws300-6min"  # the folder of the runs kept so far
    assert test_runs.argv(2)[3:] == ["demo", "--seed", "2", "--minutes", "6", "--warm-start-updates", "300"]
    validation = settings_of(parse_args(["--warm-start-updates", "4", "--pretrained", "--validation"]))
    assert validation.argv(0)[-4:] == ["4", "--base", "minilm", "--validation"]
    assert validation.folder() == "val-minilm-ws4-6min" and validation.heldout_split == "validation_words"
    folders = {
        settings_of(parse_args(argv)).folder()
        for argv in (
            [],
            ["--validation"],
            ["--base", "minilm"],
            ["--base", "/models/smollm2-135m-instruct", "--validation"],
            ["--warm-start-updates", "0"],
        )
    }
    assert folders == {
        "wsdefault-6min",
        "val-wsdefault-6min",
        "minilm-wsdefault-6min",
        "val-smollm2-135m-instruct-wsdefault-6min",
        "ws0-6min",
    }
    with pytest.raises(SystemExit):  # one base or the other
        parse_args(["--base", "smollm2", "--pretrained"])


def test_the_unseen_validation_selection_is_passed_on_and_kept_apart() -> None:
    unseen = settings_of(
        parse_args(["--pretrained", "--validation", "--validation-split", "validation_unseen"])
    )
    assert unseen.argv(1)[-5:] == [
        "--base",
        "minilm",
        "--validation",
        "--validation-split",
        "validation_unseen",
    ]
    assert (
        unseen.heldout_split == "validation_unseen" and unseen.folder() == "val-unseen-minilm-wsdefault-6min"
    )
    assert out_name(None, True, "validation_unseen") == "demo_seeds_validation_unseen.json"
    with pytest.raises(SystemExit):  # a selection without --validation would silently score test
        parse_args(["--validation-split", "validation_unseen"])
    heads = settings_of(parse_args(["--pretrained", "--encoder-layers", "0"]))
    assert heads.argv(0)[-4:] == ["--base", "minilm", "--encoder-layers", "0"]
    assert heads.folder() == "minilm-L0-wsdefault-6min"  # apart from the default top-layer runs
    spans = settings_of(parse_args(["--pretrained", "--encoder-candidates", "spans"]))
    assert spans.argv(0)[-4:] == ["--base", "minilm", "--encoder-candidates", "spans"]
    assert spans.folder() == "minilm-spans-wsdefault-6min"  # apart from the pooled reading's runs
    fewer = settings_of(parse_args(["--pretrained", "--collectors", "1"]))
    assert fewer.argv(0)[-4:] == ["--base", "minilm", "--collectors", "1"]
    assert fewer.folder() == "minilm-c1-wsdefault-6min"
    screen = settings_of(parse_args(["--observation", "screen"]))
    assert screen.argv(0)[-2:] == ["--observation", "screen"]
    assert screen.folder() == "screen-wsdefault-6min"  # apart from the tree's runs
    tree = settings_of(parse_args(["--observation", "tree"]))
    assert tree.folder() == "wsdefault-6min"  # the tree is the default: the same runs
    rephrased = settings_of(parse_args(["--paraphrase", "0.5", "--validation"]))
    assert rephrased.argv(0)[-3:] == ["--paraphrase", "0.5", "--validation"]
    assert rephrased.folder() == "val-para0.5-wsdefault-6min"  # apart from the template-only runs


def test_the_result_goes_to_the_out_file_given_and_validation_to_its_own(tmp_path: Path) -> None:
    assert out_name(None, validation=False) == "demo_seeds.json"  # bench/results/demo_seeds.json
    assert out_name(None, validation=True) == "demo_seeds_validation.json"
    assert out_name("demo_seeds_ws4.5min", validation=False) == "demo_seeds_ws4.5min.json"  # dots kept
    out = tmp_path / "runs" / "val.json"
    assert write_result(out_name(str(out), validation=True), {"x": 1}) == out and out.exists()


def test_a_kept_seed_is_reused_only_when_it_scored_the_same_split(tmp_path: Path) -> None:
    kept = tmp_path / "summary.json"
    validation = DemoSettings(minutes=6, validation=True)
    assert kept_run(kept, validation) is None
    kept.write_text(json.dumps(_run(0.4, (0.3, 0.5), 0.6, (0.5, 0.7))))  # older summaries: test
    assert kept_run(kept, DemoSettings(minutes=6))["reused_from"] == str(kept)
    with pytest.raises(RuntimeError, match="'test', not 'validation_words'"):
        kept_run(kept, validation)
