"""The learner: batches from step rows, A-RIDE and baseline updates, warm start, a local loop."""

from distrl_core.learner.batch import StepBatch
from distrl_core.learner.config import LearnerConfig
from distrl_core.learner.learner import Learner
from simulators.local_loop import (
    InMemoryReplay,
    LoopConfig,
    RoundResult,
    evaluate_success,
    train_rounds,
)
from simulators.warm_start import WarmStartConfig, collect_demonstrations, supervised_warm_start

__all__ = [
    "InMemoryReplay",
    "Learner",
    "LearnerConfig",
    "LoopConfig",
    "RoundResult",
    "StepBatch",
    "WarmStartConfig",
    "collect_demonstrations",
    "evaluate_success",
    "supervised_warm_start",
    "train_rounds",
]
