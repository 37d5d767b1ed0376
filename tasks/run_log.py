"""What a deployment's flow run reports in its log beyond Prefect's own lines.

Our modules log through the standard `logging` module and set no level, so in a flow run's process
(where Prefect leaves the root logger at WARNING) their INFO lines vanish: among them the one line
per shard written, the acknowledgement an operator checks after a crash ("every shard a collector
reported as written is readable"), and the retries of calls to a store or server that went away.
`report_in_run_log` lets those through to the run's console, i.e. the worker's output.
"""

from __future__ import annotations

import logging

REPORTED_LOGGERS = ("storage.shards", "tasks.retry")


def report_in_run_log() -> None:
    """INFO for the loggers above, unless the user configured their level already."""
    for name in REPORTED_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.INFO)
