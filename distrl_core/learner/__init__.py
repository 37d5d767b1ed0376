"""The learner: batches from step rows, the loss of each algorithm, one update. The loops that run
it on SimDroid in one process (warm start, the local loop) live in ``simulators``."""

from distrl_core.learner.batch import StepBatch
from distrl_core.learner.config import LearnerConfig
from distrl_core.learner.learner import Learner

__all__ = ["Learner", "LearnerConfig", "StepBatch"]
