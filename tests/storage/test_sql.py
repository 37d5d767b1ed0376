from __future__ import annotations

import io
import json
from collections import defaultdict

import numpy as np
import pyarrow.parquet as pq
import pytest

from ops.cli import main as cli
from storage.catalog import list_shards, read_shard
from storage.shards import ShardWriter, ShardWriterConfig
from storage.sql_views import ReadOnlyError, open_sql
from storage.store import Store, atomic_put
from storage.synthetic import synthetic_episode


def _fill(store: Store, n: int = 40) -> None:
    rng = np.random.default_rng(3)
    for pool in ("pool_a", "pool_b"):
        config = ShardWriterConfig(pool=pool, collector_id="c0", flush_episodes=7, flush_seconds=0)
        with ShardWriter(store, config) as writer:
            for i in range(n // 2):
                writer.add_episode(synthetic_episode(rng, pool=pool, policy_version=i % 3))


def _expected_by_family(store: Store) -> dict[str, float]:
    successes: dict[str, dict[str, bool]] = defaultdict(dict)
    for shard in list_shards(store):
        for row in read_shard(store, shard.path).to_pylist():
            successes[row["task_family"]][row["episode_id"]] = row["episode_success"]
    return {fam: float(np.mean(list(eps.values()))) for fam, eps in successes.items()}


def test_views_match_a_direct_computation(any_store: Store) -> None:
    _fill(any_store)
    session = open_sql(any_store)
    rows = session.query("SELECT family, avg(success) AS rate FROM episodes GROUP BY 1").to_pylist()
    got = {r["family"]: r["rate"] for r in rows}
    assert got == pytest.approx(_expected_by_family(any_store))
    policies = session.query("SELECT policy_version, steps, episodes FROM policies ORDER BY 1").to_pylist()
    assert [p["policy_version"] for p in policies] == [0, 1, 2]
    assert sum(p["episodes"] for p in policies) == 40
    total_steps = session.query("SELECT count(*) AS n FROM steps").to_pylist()[0]["n"]
    assert sum(p["steps"] for p in policies) == total_steps
    episode = session.query("SELECT * FROM episodes LIMIT 1").to_pylist()[0]
    assert episode["length"] >= 2 and episode["duration_s"] > 0 and episode["status"] == "ok"
    tasks = session.query("SELECT sum(episodes) AS n FROM tasks").to_pylist()[0]["n"]
    assert tasks == 40
    session.close()


@pytest.mark.parametrize(
    "statement",
    [
        "DELETE FROM steps",
        "INSERT INTO steps SELECT * FROM steps",
        "CREATE TABLE x AS SELECT 1",
        "DROP VIEW episodes",
        "ATTACH 'other.duckdb'",
        "COPY (SELECT 1) TO 'leak.csv'",
        "SELECT 1; DELETE FROM steps",
        "EXPLAIN ANALYZE DELETE FROM steps",
        "SET threads = 1",
        "INSTALL httpfs",
    ],
)
def test_statements_that_write_are_refused(local_store: Store, statement: str, tmp_path, monkeypatch) -> None:
    _fill(local_store, 4)
    monkeypatch.chdir(tmp_path)
    session = open_sql(local_store)
    with pytest.raises(ReadOnlyError, match="read-only"):
        session.query(statement)
    assert not list(tmp_path.glob("leak.csv")) and not list(tmp_path.glob("other.duckdb"))
    assert session.query("SELECT count(*) AS n FROM episodes").to_pylist()[0]["n"] == 4
    session.close()


def test_reads_skip_unreadable_shards_without_moving_them(local_store: Store) -> None:
    _fill(local_store, 4)
    bad = local_store.path("trajectories", "pool=pool_a", "date=2026-11-01", "bad-000000-x.parquet")
    atomic_put(local_store, bad, b"garbage")
    session = open_sql(local_store)
    assert [b.path for b in session.skipped] == [bad]
    assert session.query("SELECT count(*) AS n FROM episodes").to_pylist()[0]["n"] == 4
    assert local_store.fs.exists(bad), "a read-only reader must not move files"


def test_empty_store_has_empty_views(local_store: Store) -> None:
    session = open_sql(local_store)
    assert session.query("SELECT count(*) AS n FROM episodes").to_pylist()[0]["n"] == 0


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet", "table"])
def test_cli_formats(local_store: Store, tmp_path, capsys, fmt: str) -> None:
    _fill(local_store, 6)
    out = tmp_path / f"result.{fmt}"
    query = "SELECT pool, count(*) AS episodes FROM episodes GROUP BY 1 ORDER BY 1"
    assert cli(["sql", query, "--store", local_store.uri, "--format", fmt, "--out", str(out)]) == 0
    if fmt == "parquet":
        assert pq.read_table(out).to_pylist() == [
            {"pool": "pool_a", "episodes": 3},
            {"pool": "pool_b", "episodes": 3},
        ]
    elif fmt == "json":
        assert next(json.loads(line) for line in out.read_text().splitlines()) == {
            "pool": "pool_a",
            "episodes": 3,
        }
    elif fmt == "csv":
        assert out.read_text().splitlines() == ['"pool","episodes"', '"pool_a",3', '"pool_b",3']
    else:
        assert "pool_a" in out.read_text() and "(2 rows)" in out.read_text()


def test_cli_refuses_writes_with_exit_code_2(local_store: Store, capsys) -> None:
    _fill(local_store, 2)
    assert cli(["sql", "DELETE FROM steps", "--store", local_store.uri]) == 2
    assert "read-only" in capsys.readouterr().err


def test_cli_reports_sql_errors_plainly(local_store: Store, capsys) -> None:
    _fill(local_store, 2)
    assert cli(["sql", "SELECT nope FROM episodes", "--store", local_store.uri]) == 1
    assert "nope" in capsys.readouterr().err


def test_cli_wires_fake_adb_to_the_server_entry_point() -> None:
    from ops.cli import _cmd_fake_adb, build_parser

    args = build_parser().parse_args(["fake-adb", "--port", "0", "--devices", "3"])
    assert args.func is _cmd_fake_adb and (args.port, args.devices, args.host) == (0, 3, "127.0.0.1")


def test_shards_view_names_the_host_that_wrote_each_shard(any_store: Store) -> None:
    """Each shard's footer carries its writer's host (`distrl.host`); the `shards` view reads it back
    per file, next to what the file holds, and a shard that predates the label shows NULL."""
    rng = np.random.default_rng(5)
    for host, pool, episodes in (("collector-a", "pool_a", 6), ("collector-b", "pool_b", 3)):
        config = ShardWriterConfig(pool=pool, collector_id="c0", flush_episodes=3, flush_seconds=0, host=host)
        with ShardWriter(any_store, config) as writer:
            for i in range(episodes):
                writer.add_episode(synthetic_episode(rng, pool=pool, policy_version=1 + i % 2))
    old = any_store.path("trajectories", "pool=pool_a", "date=2026-01-01", "old-000000-x.parquet")
    atomic_put(any_store, old, pq_bytes(synthetic_episode(rng, pool="pool_a", policy_version=0)))
    session = open_sql(any_store)
    per_host = session.query(
        "SELECT host, count(*) AS shards, sum(episodes) AS episodes, "
        "list_sort(list_distinct(flatten(list(policy_versions)))) AS versions "
        "FROM shards GROUP BY host ORDER BY host NULLS LAST"
    ).to_pylist()
    assert per_host == [
        {"host": "collector-a", "shards": 2, "episodes": 6, "versions": [1, 2]},
        {"host": "collector-b", "shards": 1, "episodes": 3, "versions": [1, 2]},
        {"host": None, "shards": 1, "episodes": 1, "versions": [0]},
    ]
    assert session.query("SELECT count(DISTINCT shard) AS n FROM shards").to_pylist()[0]["n"] == 4
    columns = session.query("SELECT * FROM steps LIMIT 0").schema.names
    assert "filename" not in columns and columns[0] == "run_id"
    session.close()


def pq_bytes(table) -> bytes:
    """A shard as writers before the host label wrote it: the step schema's metadata only."""
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()
