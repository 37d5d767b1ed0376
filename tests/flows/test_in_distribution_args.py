"""The in-distribution score of a run's last version is played as its held-out score is: on the
run's observation (a screen-observed run on the screen), the train tasks beside the held-out ones."""

from __future__ import annotations

import pytest

from flows.train_local_report import in_distribution_args
from simulators.evaluation import IN_DISTRIBUTION_SEED
from tasks.evaluation import in_distribution_split
from tasks.evaluator import EvaluatorParams


@pytest.mark.parametrize("observation", ["tree", "screen"])
def test_the_train_tasks_are_scored_on_the_runs_own_observation(observation: str) -> None:
    protocol = EvaluatorParams(split="validation_unseen", family="general", observation=observation)
    args = in_distribution_args(protocol)
    assert args["observation"] == observation
    assert args["split"] == in_distribution_split("validation_unseen") != "validation_unseen"
    assert (args["seed"], args["episodes_per_task"]) == (IN_DISTRIBUTION_SEED, 1)
    assert args["seed"] != protocol.seed  # fresh seeds, not the held-out protocol's
    assert (args["family"], args["parallel_envs"]) == ("general", protocol.parallel_envs)
