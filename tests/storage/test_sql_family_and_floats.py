"""`distrl sql` as a person meets it: the task family has one name in every view (the schema's
`task_family` kept beside it), and table output rounds floats while CSV and JSON keep every digit."""

from __future__ import annotations

import io
import json

import numpy as np
import pyarrow as pa

from storage.shards import ShardWriter, ShardWriterConfig
from storage.sql_output import format_table, write_result
from storage.sql_views import open_sql
from storage.store import Store
from storage.synthetic import synthetic_episode

RATE = 0.4486842105263158


def _fill(store: Store) -> None:
    rng = np.random.default_rng(5)
    config = ShardWriterConfig(pool="pool_a", collector_id="c0", flush_episodes=4, flush_seconds=0)
    with ShardWriter(store, config) as writer:
        for i in range(8):
            writer.add_episode(synthetic_episode(rng, pool="pool_a", policy_version=i % 2))


def test_family_and_task_family_in_steps_and_episodes(local_store: Store) -> None:
    _fill(local_store)
    session = open_sql(local_store)
    try:
        for view in ("steps", "episodes"):
            rows = session.query(f"SELECT family, task_family FROM {view}").to_pylist()
            assert rows and all(r["family"] == r["task_family"] for r in rows), view
        by_steps = session.query(
            "SELECT family, count(DISTINCT episode_id) AS n FROM steps GROUP BY 1 ORDER BY 1"
        )
        by_episodes = session.query("SELECT family, count(*) AS n FROM episodes GROUP BY 1 ORDER BY 1")
        assert by_steps.to_pylist() == by_episodes.to_pylist()
    finally:
        session.close()


def test_table_output_rounds_floats_csv_and_json_keep_them(tmp_path) -> None:
    table = pa.table({"rate": [RATE, 12.0, 123456.7, 1e-7], "n": [1, 2, 3, 4], "name": ["a", "b", "c", "d"]})
    text = format_table(table)
    assert "0.4487" in text and str(RATE) not in text
    assert "123457" in text and "1e-07" in text and "12 " in text
    for fmt in ("csv", "json"):
        out = tmp_path / f"out.{fmt}"
        write_result(table, fmt, out)
        assert str(RATE) in out.read_text(), fmt
    first = json.loads(io.StringIO((tmp_path / "out.json").read_text()).readline())
    assert first["rate"] == RATE
