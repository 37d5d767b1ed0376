"""The one builder of a learning-curve run's settings, shared by bench.learning_curve and
bench.staleness: parsed overrides, a bad one refused in the parent, staleness derived from it."""

from __future__ import annotations

import argparse

import pytest

from bench._curve_settings import CurveSettings, add_curve_arguments, curve_settings, parse_overrides


def _parsed(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_curve_arguments(parser, env_steps=500)
    return parser.parse_args(argv)


def test_overrides_are_read_as_python_values_and_plain_strings_stay_strings() -> None:
    assert parse_overrides(["actor_lr=1e-3", "normalize_advantages=False", "algorithm=gigpo"]) == {
        "actor_lr": 1e-3,
        "normalize_advantages": False,
        "algorithm": "gigpo",
    }


def test_settings_take_every_field_the_command_line_has() -> None:
    settings = curve_settings(_parsed(["--learner", "actor_lr=1e-3", "--warm", "noise=0.2", "--validation"]))
    assert settings == CurveSettings(
        env_steps=500, learner={"actor_lr": 1e-3}, warm={"noise": 0.2}, validation=True
    )


def test_a_bad_override_fails_when_the_settings_are_built() -> None:
    with pytest.raises(TypeError, match="no_such_field"):
        curve_settings(_parsed(["--learner", "no_such_field=1"]))
    with pytest.raises(ValueError, match="behaviour_lag"):
        CurveSettings(env_steps=10, behaviour_lag=-1)


def test_stale_settings_change_only_the_lags() -> None:
    base = CurveSettings(env_steps=10, learner={"actor_lr": 1e-3})
    stale = base.stale(behaviour_lag=2, max_policy_lag=6)
    assert stale.learner == {"actor_lr": 1e-3, "max_policy_lag": 6} and stale.behaviour_lag == 2
    assert base.learner == {"actor_lr": 1e-3} and stale.env_steps == base.env_steps


def test_a_tiny_learning_curve_runs_end_to_end(tmp_path) -> None:
    """bench.learning_curve hands its jobs a CurveSettings; a field they read and it lacks fails here."""
    import json

    from bench.learning_curve import main

    out = tmp_path / "curve.json"
    main([
        "--seeds", "0", "--methods", "aride", "digirl", "--env-steps", "60", "--episodes-per-round", "4",
        "--updates-per-round", "1", "--eval-tasks", "2", "--eval-episodes", "1",
        "--warm-start-updates", "2", "--no-timing", "--out", str(out),
    ])  # fmt: skip
    document = json.loads(out.read_text())
    assert {r["method"] for r in document["runs"]} == {"aride", "digirl"}
    assert all(r["rounds"][-1]["env_steps"] >= 60 for r in document["runs"])
    assert document["settings"]["learner"] == {} and out.with_suffix(".png").exists()


def test_an_override_of_one_algorithms_loss_reaches_only_that_algorithms_methods() -> None:
    settings = CurveSettings(env_steps=10, learner={"decoupled_retrace": False, "actor_lr": 1e-3})
    assert settings.learner_for("decoupled_ppo") == {"decoupled_retrace": False, "actor_lr": 1e-3}
    assert settings.learner_for("aride") == {"actor_lr": 1e-3}  # LearnerConfig would refuse it
    with pytest.raises(ValueError, match="decoupled_retrace"):
        CurveSettings(env_steps=10, learner={"decoupled_retrace": 3.0})  # still checked by its reader


def test_each_validation_selection_trains_beside_its_own_fit_tasks_and_vocabulary() -> None:
    from simulators.simdroid.tasks import load_tasks

    cases = {
        (): ("train", "test", "train"),
        ("--validation",): ("fit", "validation", "train"),  # the vocabulary of the first validation runs
        ("--validation", "--validation-words"): ("fit_words", "validation_words", "fit_words"),
        ("--validation", "--validation-unseen"): ("fit_unseen", "validation_unseen", "fit_unseen"),
    }
    for argv, (fit, held, vocabulary) in cases.items():
        settings = curve_settings(_parsed(list(argv)))
        train, evaluation = settings.splits("general")
        assert [t.task_id for t in train] == [t.task_id for t in load_tasks("general", fit)]
        assert [t.task_id for t in evaluation] == [t.task_id for t in load_tasks("general", held)]
        assert settings.policy_config(3).vocabulary == vocabulary and settings.heldout_split == held
    with pytest.raises(ValueError, match="add --validation"):
        curve_settings(_parsed(["--validation-unseen"]))
    with pytest.raises(ValueError, match="pick one"):
        curve_settings(_parsed(["--validation", "--validation-words", "--validation-unseen"]))


def test_an_encoder_base_trains_the_top_layers_asked_for(tmp_path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')  # an encoder folder, by its config
    for layers in (0, 2):
        config = CurveSettings(env_steps=10, base=str(tmp_path), encoder_layers=layers).policy_config(0)
        assert config.encoder is not None and config.encoder.trainable_layers == layers
    with pytest.raises(ValueError, match="encoder_layers=-1"):
        CurveSettings(env_steps=10, encoder_layers=-1)
