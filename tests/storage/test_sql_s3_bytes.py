"""`distrl sql` over S3 downloads what a query names and no more: a session's opening fetches the
shards' footers (within 1.2x their bytes), and a query the column chunks its scans read (within 1.2x
their bytes, as each shard's footer sizes them), with a screenshot per step and without. Bytes are
counted at a moto server (`bench.s3_counter`); they do not depend on timing."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.s3_counter import S3Counter
from storage.catalog import check_footer, list_shards
from storage.schema import IMAGE_COLUMN
from storage.shards import ShardWriter, ShardWriterConfig
from storage.sql_sources import FOOTER_READ_BYTES, RangeCache, RangedShards, footer_bytes
from storage.sql_views import open_sql
from storage.store import Store, open_store
from storage.synthetic import synthetic_episode

IMAGE_BYTES = 20_000  # incompressible, as a PNG is
# Each query with the shard columns it needs: the views dedupe episodes by `episode_id` (`filename`
# is a partition value, never read).
QUERIES = {
    "SELECT avg(success) FROM episodes": {"episode_id", "episode_success"},
    "SELECT avg(reward) FROM steps": {"episode_id", "reward"},
    "SELECT count(*) FROM steps": {"episode_id"},
    "SELECT pool, count(*) AS n, avg(success) AS s FROM episodes GROUP BY ALL": {
        "episode_id",
        "pool",
        "episode_success",
    },
    "SELECT task_family, avg(reward) AS r FROM steps GROUP BY task_family": {
        "episode_id",
        "task_family",
        "reward",
    },
}


def _write(store: Store, screenshots: bool, episodes: int = 12) -> None:
    """Shards of 4 episodes; with `screenshots`, each step with its own image."""
    rng = np.random.default_rng(0)
    config = ShardWriterConfig(pool="pool_a", collector_id="c0", flush_episodes=4, flush_seconds=0)
    with ShardWriter(store, config) as writer:
        for _ in range(episodes):
            episode = synthetic_episode(rng)
            if screenshots:
                images = pa.array([rng.bytes(IMAGE_BYTES) for _ in range(episode.num_rows)], pa.binary())
                episode = episode.set_column(
                    episode.schema.get_field_index(IMAGE_COLUMN), IMAGE_COLUMN, images
                )
            writer.add_episode(episode)


def _footers(store: Store) -> list[pq.FileMetaData]:
    footers = []
    for shard in list_shards(store):
        with store.fs.open(shard.path, "rb") as fh:
            footers.append(pq.ParquetFile(fh).metadata)
    return footers


def _chunk_bytes(footers: list[pq.FileMetaData], columns: set[str]) -> int:
    """The bytes of the named columns' chunks in every row group, as the footers give them."""
    return sum(
        meta.row_group(g).column(c).total_compressed_size
        for meta in footers
        for g in range(meta.num_row_groups)
        for c in range(meta.num_columns)
        if meta.row_group(g).column(c).path_in_schema in columns
    )


def _rows(table: pa.Table) -> list[tuple]:
    """The rows in order, floats to 9 places: a sum's last bits depend on how threads split it."""

    def value(v: object) -> object:
        return round(v, 9) if isinstance(v, float) else v

    return sorted((tuple(value(v) for v in row.values()) for row in table.to_pylist()), key=repr)


def _downloaded(counter: S3Counter, phase: str, kind: str | None = None) -> int:
    totals = counter.phase_totals(phase)
    return sum(t["bytes_out"] for k, t in totals.items() if kind in (None, k))


@pytest.fixture(params=[True, False], ids=["screenshots", "no-screenshots"])
def written(
    request: pytest.FixtureRequest, counted_s3_store: tuple[Store, S3Counter]
) -> tuple[Store, S3Counter, list[pq.FileMetaData]]:
    store, counter = counted_s3_store
    counter.phase = "write"
    _write(store, screenshots=request.param)
    counter.phase = "footers"
    return store, counter, _footers(store)


@pytest.mark.parametrize("statement", list(QUERIES))
def test_a_query_downloads_its_columns_chunks_and_the_footers_within_a_fifth_more(
    written: tuple[Store, S3Counter, list[pq.FileMetaData]], statement: str
) -> None:
    store, counter, footers = written
    counter.phase = "open"
    session = open_sql(store)  # a fresh session: the query is its first, as `distrl sql` runs it
    try:
        assert len(session.shards) == 3 and not session.skipped
        counter.phase = "query"
        answer = session.query(statement)
        counter.phase = "again"
        assert _rows(session.query(statement)) == _rows(answer)
    finally:
        session.close()
    footer_total = sum(meta.serialized_size + 8 for meta in footers)  # metadata, length, magic
    assert footer_total <= _downloaded(counter, "open", "GET") <= 1.2 * footer_total
    named = _chunk_bytes(footers, QUERIES[statement])
    assert named > 0
    assert named <= _downloaded(counter, "query") <= 1.2 * named
    assert _downloaded(counter, "again") == 0  # the session kept what it downloaded
    shard_bytes = sum(s.size for s in list_shards(store))
    if _chunk_bytes(footers, {IMAGE_COLUMN}) > shard_bytes / 2:  # the images, never read
        assert _downloaded(counter, "open") + _downloaded(counter, "query") < shard_bytes / 20


def test_a_query_on_s3_answers_as_the_same_query_on_a_local_copy(
    written: tuple[Store, S3Counter, list[pq.FileMetaData]], tmp_path
) -> None:
    """Footers parsed from their own bytes and chunks fetched exactly (some from the session's
    kept ranges) give the same rows as DuckDB reading the files itself."""
    store, _, _ = written
    local = open_store(str(tmp_path / "copy"))
    for shard in list_shards(store):
        relative = shard.path.removeprefix(store.root + "/")
        local.fs.pipe_file(local.path(relative), store.fs.cat_file(shard.path))
    statements = [*QUERIES, "SELECT * FROM tasks", "SELECT * FROM policies", "SELECT * FROM episodes"]
    remote_session, local_session = open_sql(store), open_sql(local)
    try:
        for statement in statements:
            assert _rows(remote_session.query(statement)) == _rows(local_session.query(statement)), statement
    finally:
        remote_session.close()
        local_session.close()


def test_a_footer_larger_than_the_guess_takes_a_second_get_and_the_next_guess_holds_it(
    counted_s3_store: tuple[Store, S3Counter], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, counter = counted_s3_store
    _write(store, screenshots=True, episodes=8)
    monkeypatch.setattr("storage.sql_sources.FIRST_FOOTER_GUESS", 64)
    ranged = RangedShards(store.ranged_fs, cache_bytes=0)
    first, second = list_shards(store)
    footer = footer_bytes(store.fs.cat_file(first.path, start=first.size - 8))
    counter.phase = "first"
    opened = ranged.footer(first.path, first.size)
    assert counter.phase_totals("first")["GET"]["requests"] == 2  # 64 bytes, then the rest
    assert footer is not None and _downloaded(counter, "first") == footer
    assert check_footer(store, first.path, opened).equals(
        check_footer(store, first.path), check_metadata=True
    )
    assert ranged.footer_guess.bytes == footer + footer // 8
    counter.phase = "second"
    ranged.footer(second.path, second.size)
    assert counter.phase_totals("second")["GET"]["requests"] == 1


def test_a_shard_opened_for_its_footer_answers_pyarrows_footer_read_from_the_footer_alone(
    counted_s3_store: tuple[Store, S3Counter],
) -> None:
    store, counter = counted_s3_store
    _write(store, screenshots=True, episodes=4)
    (shard,) = list_shards(store)
    assert shard.size > FOOTER_READ_BYTES  # pyarrow's footer read starts among the images
    ranged = RangedShards(store.ranged_fs, cache_bytes=0)
    opened = ranged.footer(shard.path, shard.size)
    counter.phase = "parse"
    metadata = pq.ParquetFile(opened).metadata
    assert _downloaded(counter, "parse") == 0
    assert metadata.equals(_footers(store)[0])


def test_the_range_cache_serves_what_it_kept_and_names_the_gaps_to_fetch() -> None:
    cache = RangeCache(limit=10)
    cache.put("a", 100, b"01234567")
    cache.put("a", 200, b"xyz")  # 11 bytes in all: past the limit, not kept
    assert cache.prefix("a", 102, 105) == b"234" and cache.prefix("a", 100, 108) == b"01234567"
    assert cache.prefix("a", 105, 120) == b"567"  # the kept run at the start of a longer read
    assert cache.prefix("a", 99, 101) == b"" and cache.prefix("a", 200, 201) == b""
    assert cache.prefix("b", 102, 105) == b""
    assert cache.next_start("a", 90, 150) == 100  # fetch 90..100, then the kept bytes
    assert cache.next_start("a", 108, 150) == 150 and cache.next_start("a", 90, 100) == 100
    assert cache.size == 8
