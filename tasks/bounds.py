"""Bounds and choices shared by the flows' parameter models, so that the CLI (whose options derive
from the models, `ops.cli_options`) and the deployments refuse the same values.

Without them `--collectors 99999999999999999999999` started threads until memory ran out,
`--recent-days 99999999999999999999` ended in an OverflowError, and `--family bogusfam` trained on
nothing. The ceilings are far above any sensible run and well below what breaks: they catch typos
and runaway values, not ambition.
"""

from __future__ import annotations

from typing import Literal

Family = Literal["general", "webshop"]  # distrl_core.envs.protocol.FAMILIES
# simulators.simdroid.tasks.SPLIT_CHOICES: the splits, then the selections carved from train
Split = Literal[
    "train", "test", "fit", "validation", "fit_words", "validation_words", "fit_unseen", "validation_unseen"
]
# The held-out selections a validation run can score (flows.train_local.TrainLocalParams.validation_split)
ValidationSplit = Literal["validation_words", "validation_unseen"]

MAX_ENCODER_LAYERS = 24  # top layers of an encoder base trained: deeper than any packaged base, a typo guard
MAX_SEED = 2**32 - 1  # numpy's legacy seeding and most RNGs take 32 bits; negative seeds fail in numpy
MAX_THREADS = 256  # collectors or environments in one process: each holds a policy or an emulator
MAX_PROCESSES = 64  # learner processes (one per GPU): a node's worth, a typo guard
MAX_BATCH = 65_536  # episodes, trajectories or steps handled together
MAX_UPDATES = 100_000_000
MAX_MINUTES = 60 * 24 * 366  # a year
MAX_SECONDS = 86_400.0  # a day, for latencies, intervals and waits
MAX_DAYS = 3_660  # ten years of daily partitions
