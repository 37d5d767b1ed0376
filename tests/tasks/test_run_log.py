"""A deployment's collector reports each shard it writes in its run's output, as a flow-run process
configures logging (root at WARNING): the line an operator checks after a crash."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import numpy as np
import pytest

from storage.shards import ShardWriter, ShardWriterConfig
from storage.store import open_store
from storage.synthetic import synthetic_episode
from tasks.run_log import REPORTED_LOGGERS, report_in_run_log


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=0)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def root_at_warning() -> Iterator[_Collect]:
    """The root logger as Prefect leaves it in a flow run's process: WARNING, one console handler."""
    root = logging.getLogger()
    handler, saved = _Collect(), root.level
    levels = {name: logging.getLogger(name).level for name in REPORTED_LOGGERS}
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(saved)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def test_each_shard_written_is_reported(root_at_warning: _Collect, tmp_path) -> None:
    report_in_run_log()
    store = open_store(str(tmp_path / "store"))
    config = ShardWriterConfig(pool="pool_a", collector_id="a0", flush_episodes=1, flush_seconds=0)
    with ShardWriter(store, config) as writer:
        writer.add_episode(synthetic_episode(np.random.default_rng(0), pool="pool_a", policy_version=1))
    reported = [line for line in root_at_warning.lines if line.startswith("wrote shard ")]
    assert len(reported) == 1 and writer.written[0] in reported[0]


def test_a_level_the_user_set_is_kept(root_at_warning: _Collect) -> None:
    logging.getLogger("tasks.retry").setLevel(logging.ERROR)
    report_in_run_log()
    assert logging.getLogger("tasks.retry").level == logging.ERROR
    assert logging.getLogger("storage.shards").level == logging.INFO
