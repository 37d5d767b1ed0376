"""Shards with a screenshot per step are mostly image bytes: readers that do not use the image leave
its column unread. The replay that drops screenshots never reads them; `distrl sql`'s views scan
`screenshot_png` only for queries that ask for it, and on S3 download only what they scan."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import storage.catalog as catalog
from bench.s3_counter import S3Counter
from storage.replay import Replay
from storage.replay_config import ReplaySettings
from storage.schema import IMAGE_COLUMN
from storage.shards import ShardWriter, ShardWriterConfig
from storage.sql_views import VIEW_NAMES, open_sql
from storage.store import Store, open_store
from storage.synthetic import synthetic_episode

IMAGE_BYTES = 20_000  # incompressible, as a PNG is: a shard is ~99 % image


def _write_image_shards(store: Store, episodes: int = 8) -> int:
    """Shards of 4 episodes, each step with its own image; returns the image bytes written."""
    rng = np.random.default_rng(0)
    config = ShardWriterConfig(pool="pool_a", collector_id="c0", flush_episodes=4, flush_seconds=0)
    written = 0
    with ShardWriter(store, config) as writer:
        for _ in range(episodes):
            episode = synthetic_episode(rng)
            images = [rng.bytes(IMAGE_BYTES) for _ in range(episode.num_rows)]
            written += IMAGE_BYTES * len(images)
            index = episode.schema.get_field_index(IMAGE_COLUMN)
            writer.add_episode(episode.set_column(index, IMAGE_COLUMN, pa.array(images, pa.binary())))
    return written


class _CountingFile:
    """A shard file that counts the bytes read from it."""

    def __init__(self, file, counted: list[int]) -> None:
        self._file, self._counted = file, counted

    def read(self, size: int = -1) -> bytes:
        data = self._file.read(size)
        self._counted[0] += len(data)
        return data

    def __getattr__(self, name: str):
        return getattr(self._file, name)

    def __enter__(self) -> _CountingFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()


@pytest.fixture
def image_store(tmp_path: Path) -> tuple[Store, int]:
    store = open_store(str(tmp_path / "store"))
    return store, _write_image_shards(store)


@pytest.mark.parametrize("keep", [False, True])
def test_the_replay_reads_the_image_column_only_when_it_keeps_screenshots(
    image_store: tuple[Store, int], keep: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, image_bytes = image_store
    counted = [0]
    real_open = catalog._open
    monkeypatch.setattr(catalog, "_open", lambda s, p, **kw: _CountingFile(real_open(s, p, **kw), counted))
    replay = Replay(store, ReplaySettings(min_size_steps=1, samples_per_insert=None, keep_screenshots=keep))
    try:
        report = replay.ingest()
        assert report.shards == 2 and report.episodes == 8 and report.quarantined == 0
        stored = replay.con.execute(f"SELECT count({IMAGE_COLUMN}), count(*) FROM steps").fetchall()[0]
        assert stored == ((report.steps if keep else 0), report.steps)
    finally:
        replay.close()
    if keep:
        assert counted[0] > image_bytes
    else:  # footers, other columns and read-ahead: ~11 % of the images here, not all of them
        assert counted[0] < image_bytes / 4


def test_a_shard_read_without_images_is_validated_as_a_whole(image_store: tuple[Store, int]) -> None:
    store, _ = image_store
    path = catalog.list_shards(store)[0].path
    full = catalog.read_shard(store, path)
    light = catalog.read_shard(store, path, without_images=True)
    assert light.schema.equals(full.schema)
    assert light.column(IMAGE_COLUMN).null_count == light.num_rows
    assert light.drop_columns([IMAGE_COLUMN]).equals(full.drop_columns([IMAGE_COLUMN]))


def _scanned_columns(plan: object) -> set[str]:
    """Columns that the Parquet scans of a DuckDB JSON plan read."""
    found: set[str] = set()
    if isinstance(plan, dict):
        info = plan.get("extra_info", {})
        if isinstance(info, dict) and "PARQUET" in str(info.get("Function", plan.get("name", ""))).upper():
            projections = info.get("Projections", [])
            found.update([projections] if isinstance(projections, str) else projections)
        for value in plan.values():
            found |= _scanned_columns(value)
    elif isinstance(plan, list):
        for item in plan:
            found |= _scanned_columns(item)
    return found


@pytest.mark.parametrize(
    ("statement", "reads_image"),
    [
        *((f"SELECT * FROM {view}", view == "steps") for view in VIEW_NAMES),
        ("SELECT count(*) FROM steps", False),
        ("SELECT pool, avg(success) FROM episodes GROUP BY ALL", False),
        ("SELECT episode_id, step, action FROM steps WHERE reward > 0", False),
        (f"SELECT octet_length({IMAGE_COLUMN}) FROM steps", True),
    ],
)
def test_sql_scans_the_image_column_only_for_queries_that_ask_for_it(
    image_store: tuple[Store, int], statement: str, reads_image: bool
) -> None:
    store, _ = image_store
    session = open_sql(store)
    try:
        (row,) = session.con.execute(f"EXPLAIN (FORMAT json) {statement}").fetchall()
        scanned = _scanned_columns(json.loads(row[1]))
        assert "episode_id" in scanned or "pool" in scanned  # the plan was read: scans were found
        assert (IMAGE_COLUMN in scanned) is reads_image
    finally:
        session.close()


def test_a_replay_without_screenshots_ingests_from_s3_through_byte_ranges(s3_store: Store) -> None:
    image_bytes = _write_image_shards(s3_store)
    replay = Replay(
        s3_store, ReplaySettings(min_size_steps=1, samples_per_insert=None, keep_screenshots=False)
    )
    try:
        report = replay.ingest()
        assert report.shards == 2 and report.episodes == 8 and report.quarantined == 0
        assert replay.con.execute(f"SELECT count({IMAGE_COLUMN}) FROM steps").fetchall()[0][0] == 0
        batch = replay.sample(4, seed=1)
        assert batch.steps.num_rows > 0
    finally:
        replay.close()
    assert image_bytes > 0


def _downloaded(counter: S3Counter, phase: str) -> int:
    return sum(t["bytes_out"] for t in counter.phase_totals(phase).values())


def test_sql_on_s3_downloads_the_image_column_only_for_queries_that_ask_for_it(
    counted_s3_store: tuple[Store, S3Counter],
) -> None:
    store, counter = counted_s3_store
    image_bytes = _write_image_shards(store)  # 2 shards, each ~99 % image
    counter.phase = "open"
    session = open_sql(store)
    try:
        assert len(session.shards) == 2 and not session.skipped
        answers = {}
        for name, statement in {
            "count": "SELECT count(*) AS n FROM steps",
            "group": "SELECT task_family, avg(reward) AS r FROM steps GROUP BY task_family ORDER BY 1",
            "shards": "SELECT shard, steps FROM shards ORDER BY shard",
            "count again": "SELECT count(*) AS n FROM steps",
            "images": f"SELECT step, episode_id, {IMAGE_COLUMN} FROM steps",
        }.items():
            counter.phase = name
            answers[name] = session.query(statement)
    finally:
        session.close()
    # opening fetches each footer once, its own bytes (tests/storage/test_sql_s3_bytes.py)
    assert counter.phase_totals("open")["GET"]["bytes_out"] < image_bytes / 50
    for name in ("count", "group", "shards"):  # a few small columns, no footer again
        assert 0 < _downloaded(counter, name) < image_bytes / 50, name
    assert _downloaded(counter, "count again") == 0  # the session kept what it downloaded
    assert _downloaded(counter, "images") > image_bytes  # asked for: every image is fetched
    written = pa.concat_tables(catalog.read_shard(store, s.path) for s in catalog.list_shards(store))

    def by_step(table: pa.Table) -> dict[tuple[str, int], bytes]:
        rows = table.select(["episode_id", "step", IMAGE_COLUMN]).to_pylist()
        return {(r["episode_id"], r["step"]): r[IMAGE_COLUMN] for r in rows}

    assert by_step(answers["images"]) == by_step(written)  # the images, byte for byte
    assert answers["count"].column("n").to_pylist() == [written.num_rows]
    assert sum(answers["shards"].column("steps").to_pylist()) == written.num_rows
    assert answers["group"].num_rows == len(set(written.column("task_family").to_pylist()))
