"""Third-party terminal chatter switched off at the source, by the libraries' own settings.

They are read when the libraries are imported, so they are set in the environment: of this process
first thing (`distrl ...`), and of every process `distrl up` starts. transformers' "Loading weights" /
"Writing model shards" bars follow huggingface_hub's progress-bar switch; MLflow prints emoji
"View run" links after every run unless told not to, and INFO lines at every publish. A variable the user set wins.
"""

from __future__ import annotations

import os

QUIET_ENV = {
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
    # "Waiting up to 300 seconds for model version to finish creation" at every publish.
    "MLFLOW_LOGGING_LEVEL": "WARNING",
    # MLflow's telemetry (DO_NOT_TRACK counts only as "true"): offline its thread fails and pops a
    # variable from os.environ while another thread's HTTP call iterates it (a KeyError in log_batch).
    "MLFLOW_DISABLE_TELEMETRY": "true",
}


def quiet_third_party() -> None:
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
