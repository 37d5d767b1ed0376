"""`distrl demo --validation`: choices made without the test split. It learns from the fit_words
tasks and scores validation_words (train templates holding words no fit task has), or with
`--validation-split validation_unseen` learns from fit_unseen and scores validation_unseen (a held-out
template and parameter per task); the test split is never loaded."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

import simulators.simdroid.tasks as simdroid_tasks
from ops.cli_flows import _demo_options, _train_local_options
from simulators.simdroid.tasks import load_tasks
from tests.flows.conftest import small_validation_demo


def test_the_cli_offers_validation_for_the_demo_and_train_local() -> None:
    for add_options in (_demo_options, _train_local_options):
        parser = argparse.ArgumentParser()
        add_options(parser)
        assert parser.parse_args([]).options.build(parser.parse_args([])).validation is False
        args = parser.parse_args(["--validation", "--pretrained"])
        params = args.options.build(args)
        assert params.validation is True and params.base == "minilm"
        assert params.validation_split == "validation_words"
        args = parser.parse_args(["--validation", "--validation-split", "validation_unseen"])
        assert args.options.build(args).validation_split == "validation_unseen"


def test_validation_mode_refuses_an_evaluator_that_scores_another_split() -> None:
    from flows.train_local_params import TrainLocalParams, heldout_split, trained_split
    from tasks.evaluator import EvaluatorParams

    assert (trained_split(TrainLocalParams()), heldout_split(TrainLocalParams())) == ("train", "test")
    validation = TrainLocalParams(validation=True)
    assert (trained_split(validation), heldout_split(validation)) == ("fit_words", "validation_words")
    with pytest.raises(ValueError, match=r"evaluator\.split"):
        TrainLocalParams(validation=True, evaluator=EvaluatorParams(split="test"))
    unseen = TrainLocalParams(validation=True, validation_split="validation_unseen")
    assert (trained_split(unseen), heldout_split(unseen)) == ("fit_unseen", "validation_unseen")
    with pytest.raises(ValueError, match=r"evaluator\.split is 'validation_words'"):
        TrainLocalParams(
            validation=True,
            validation_split="validation_unseen",
            evaluator=EvaluatorParams(split="validation_words"),
        )
    # without validation a selection would be ignored and test scored: refused instead
    with pytest.raises(ValueError, match="applies only to a validation run"):
        TrainLocalParams(validation_split="validation_unseen")


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    ("selection", "fit"), [("validation_words", "fit_words"), ("validation_unseen", "fit_unseen")]
)
def test_a_validation_demo_never_loads_the_test_split(
    demo_root: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    selection: str,
    fit: str,
) -> None:
    import flows.train_local  # noqa: F401 — imports every module that loads tasks before the spy
    from ops.demo import run_demo
    from storage.sql_views import open_sql
    from storage.store import open_store

    asked: list[str | None] = []
    real = simdroid_tasks.load_tasks

    def load_tasks_but_test(family: str | None = None, split: str | None = None) -> list:
        asked.append(split)
        if split in (None, "test"):
            raise AssertionError(f"load_tasks({family!r}, {split!r}) in validation mode")
        return real(family, split)

    # every module that imported the real one (the tokenizer imports it when it builds a corpus);
    # this one keeps it, to check the run against
    holders = [
        m
        for m in list(sys.modules.values())
        if getattr(m, "load_tasks", None) is real and m is not sys.modules[__name__]
    ]
    assert simdroid_tasks in holders and len(holders) >= 5
    for module in holders:
        monkeypatch.setattr(module, "load_tasks", load_tasks_but_test)

    params = small_validation_demo(selection)
    summary = run_demo(params, root=str(demo_root))

    assert {fit, selection} <= set(asked) and "test" not in asked
    assert summary["heldout_split"] == selection and summary["trained_split"] == fit
    on_disk = json.loads((demo_root / "summary.json").read_text())
    assert on_disk["heldout_split"] == selection
    assert (on_disk["observation"], on_disk["paraphrase"]) == (params.observation, params.paraphrase)
    validation = load_tasks("general", selection)
    assert summary["heldout_episodes"] == len(validation)  # every validation task
    assert summary["final_version"] > 1 and summary["in_distribution_final"] is not None
    printed = capsys.readouterr().out
    assert f"({selection} split)" in printed and f"Trained tasks ({fit})" in printed
    assert "test split" not in printed.replace("the test split is never loaded", "")

    # The collectors played fit tasks only; the warm start's version says where it came from.
    fit_ids = {t.task_id for t in load_tasks("general", fit)}
    session = open_sql(open_store())
    played = {row["task_id"] for row in session.query("SELECT DISTINCT task_id FROM episodes").to_pylist()}
    session.close()
    assert played and played <= fit_ids
    from storage.registry import PolicyRegistry

    registry = PolicyRegistry()
    assert registry.tags(1)["heldout_protocol"].startswith(f"{selection}:general:1x")
    warm_start_run = registry.client.get_run(registry.client.get_model_version(registry.name, "1").run_id)
    assert warm_start_run.data.params["warm_start.split"] == fit
