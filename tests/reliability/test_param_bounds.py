"""Huge and unknown parameter values are refused alike by the CLI (one line naming
the flag and the bound, exit code 2) and by the flows' parameter models, which deployments
validate every run's parameters against: nothing starts a runaway number of threads, overflows a
date, or trains on a family that does not exist."""

from __future__ import annotations

from typing import get_args

import pytest
from pydantic import ValidationError

from distrl_core.envs.protocol import FAMILIES
from ops.cli import main as cli
from simulators.simdroid.tasks import SPLIT_CHOICES
from tasks.bounds import Family, Split

HUGE = "99999999999999999999999"


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["train-local", "--collectors", HUGE], ["--collectors", "<= 256"]),
        (["demo", "--collectors", HUGE], ["--collectors", "<= 256"]),
        (["train-local", "--minutes", "1e300"], ["--minutes", "<="]),
        (["demo", "--seed", "-1"], ["--seed", ">= 0"]),
        (["demo", "--seed", HUGE], ["--seed", "<="]),
        (["retrain", "--recent-days", "99999999999999999999"], ["--recent-days", "<= 3660"]),
        (["retrain", "--updates", HUGE], ["--updates", "<="]),
        (["retrain", "--family", "bogusfam"], ["--family", "webshop"]),
        (["retrain", "--split", "heldout"], ["--split", "validation_words"]),
        (["up", "--bucket", "Not_A_Bucket"], ["--bucket"]),
    ],
)
def test_the_cli_refuses(argv: list[str], names: list[str], capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    home = ["--home", str(tmp_path / "home")] if argv[0] in ("train-local", "retrain") else []
    with pytest.raises(SystemExit) as exited:
        cli([*argv, *home])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert exited.value.code == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert all(name in errors[0] for name in names), err


def _params():
    from flows.retrain import RetrainParams
    from flows.train_local import TrainLocalParams
    from tasks.collector import CollectorParams
    from tasks.learner import LearnerParams

    return CollectorParams, LearnerParams, RetrainParams, TrainLocalParams


@pytest.mark.parametrize(
    ("model", "field", "value"),
    [
        ("CollectorParams", "num_envs", 10**22),
        ("CollectorParams", "family", "bogusfam"),
        ("CollectorParams", "split", "heldout"),
        ("CollectorParams", "env_kind", "emulator"),
        ("CollectorParams", "adb_port", 70000),
        ("CollectorParams", "max_minutes", 0),
        ("LearnerParams", "batch_size", 10**22),
        ("LearnerParams", "max_updates", 0),
        ("LearnerParams", "seed", -5),
        ("RetrainParams", "recent_days", 10**20),
        ("RetrainParams", "family", "bogusfam"),
        ("TrainLocalParams", "collectors", 10**22),
        ("TrainLocalParams", "envs_per_collector", 10**6),
        ("TrainLocalParams", "family", "bogusfam"),
    ],
)
def test_the_parameter_models_refuse(model: str, field: str, value: object) -> None:
    cls = {c.__name__: c for c in _params()}[model]
    with pytest.raises(ValidationError) as refused:
        cls(**{field: value})
    assert refused.value.errors()[0]["loc"][0] == field


def test_deployments_validate_parameters_against_the_models() -> None:
    """A deployment's run gets its parameters validated by Prefect against the flow's signature."""
    from prefect.exceptions import ParameterTypeError

    from flows.collect import collect
    from flows.retrain import retrain

    with pytest.raises(ParameterTypeError, match="num_envs"):
        collect.validate_parameters({"params": {"num_envs": 10**22}})
    with pytest.raises(ParameterTypeError, match="family"):
        retrain.validate_parameters({"params": {"family": "bogusfam"}})
    assert collect.validate_parameters({"params": {"num_envs": 8, "family": "webshop"}})


def test_the_choices_are_the_task_sets() -> None:
    assert get_args(Family) == FAMILIES and get_args(Split) == SPLIT_CHOICES
