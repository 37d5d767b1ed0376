"""The `observation` column (schema 1.1): written by collectors, and read as "tree" from shards of
schema 1.0, which predate it, by the learner's reader, the replay and `distrl sql` alike."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage.catalog import list_shards, read_shard
from storage.replay import Replay
from storage.replay_config import ReplaySettings
from storage.schema import SCHEMA_VERSION, SCHEMA_VERSION_KEY, SchemaError, steps_to_table
from storage.sql_views import open_sql
from storage.store import Store, atomic_put
from storage.synthetic import synthetic_episode

BASE = "trajectories/pool=pool_a/date=2026-11-01"


def _put(store: Store, name: str, table: pa.Table) -> str:
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    path = store.path(*BASE.split("/"), name)
    atomic_put(store, path, buffer.getvalue())
    return path


def _old_shard(seed: int) -> pa.Table:
    """A shard as a collector of schema 1.0 wrote it: no `observation` column."""
    table = synthetic_episode(np.random.default_rng(seed))
    old = table.drop_columns(["observation"])
    return old.replace_schema_metadata({SCHEMA_VERSION_KEY: b"1.0"})


def _screen_shard(seed: int) -> pa.Table:
    table = synthetic_episode(np.random.default_rng(seed))
    column = pa.array(["screen"] * table.num_rows, pa.string())
    table = table.set_column(table.schema.get_field_index("observation"), "observation", column)
    return table.replace_schema_metadata({SCHEMA_VERSION_KEY: SCHEMA_VERSION.encode()})


def test_old_shards_read_as_tree_and_new_ones_keep_their_value(any_store: Store) -> None:
    old = _put(any_store, "old-000000-a.parquet", _old_shard(1))
    new = _put(any_store, "new-000000-b.parquet", _screen_shard(2))
    assert set(read_shard(any_store, old).column("observation").to_pylist()) == {"tree"}
    assert set(read_shard(any_store, old, without_images=True).column("observation").to_pylist()) == {"tree"}
    assert set(read_shard(any_store, new).column("observation").to_pylist()) == {"screen"}
    replay = Replay(any_store, ReplaySettings(min_size_steps=1))
    report = replay.ingest()
    assert (report.shards, report.quarantined) == (2, 0)
    sql = open_sql(any_store)
    try:
        rows = sql.query("SELECT observation, count(*) AS n FROM steps GROUP BY 1 ORDER BY 1").to_pylist()
    finally:
        sql.close()
    counts = {r["observation"]: r["n"] for r in rows}
    assert set(counts) == {"screen", "tree"} and sum(counts.values()) == sum(
        read_shard(any_store, s.path).num_rows for s in list_shards(any_store)
    )


def test_a_store_of_old_shards_only_reads_as_tree(any_store: Store) -> None:
    _put(any_store, "old-000000-a.parquet", _old_shard(3))
    sql = open_sql(any_store)
    try:
        rows = sql.query("SELECT DISTINCT observation FROM steps").to_pylist()
    finally:
        sql.close()
    assert rows == [{"observation": "tree"}]


def test_an_unknown_observation_is_refused() -> None:
    rows = synthetic_episode(np.random.default_rng(4)).to_pylist()
    rows[0]["observation"] = "smell"
    with pytest.raises(SchemaError, match="observation"):
        steps_to_table(rows)
