"""Shards an attacker or a broken writer could leave in the store: values out of range, broken
episodes, a decompression bomb, FIFOs, links to devices, names that are glob patterns or carry
terminal escapes. The learner quarantines (or skips) each with one escaped line naming the file
and the rule, trains on the rest, and a restart does not fail on them again; `distrl sql` leaves
them out without blocking and counts a restored copy of a shard once."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.shard_probes import (
    BROKEN,
    NEWEST_VERSION,
    hostile_ingest_probe,
    hostile_shards,
    plant_special_files,
)
from storage.catalog import list_shards
from storage.replay import Replay
from storage.replay_config import ReplaySettings
from storage.schema import MAX_SHARD_BYTES
from storage.sql_views import open_sql
from storage.store import Store, atomic_put
from tests.reliability.conftest import fill

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ReplaySettings(min_size_steps=1, samples_per_insert=None)


def test_each_broken_rule_quarantines_its_shard_and_the_rest_trains(any_store: Store, caplog) -> None:
    good = fill(any_store, 6)
    hostile = hostile_shards(any_store)
    for path, (payload, _) in hostile.items():
        atomic_put(any_store, path, payload)
    with caplog.at_level(logging.WARNING, logger="storage.catalog"):
        replay = Replay(any_store, SETTINGS, newest_version=lambda: NEWEST_VERSION)
        report = replay.ingest()
    assert report.quarantined == len(BROKEN) and report.episodes == len(good)
    reasons = dict(
        replay.con.execute("SELECT path, reason FROM shards WHERE status = 'quarantined'").fetchall()
    )
    for path, (_, rule) in hostile.items():
        assert rule in reasons[path], (path, reasons[path])
        # one line per shard, naming it
        lines = [r.getMessage() for r in caplog.records if r.name == "storage.catalog"]
        assert sum(path in line for line in lines) == 1, path
    steps = replay.sample(32, seed=1).steps.to_pydict()
    assert all(abs(r) <= 1 for r in steps["reward"]) and all(-1 <= p <= 0 for p in steps["behaviour_logprob"])
    assert set(steps["policy_version"]) <= set(range(NEWEST_VERSION + 1))
    replay.close()
    assert not {s.path for s in list_shards(any_store)} & set(hostile), "quarantined shards are moved aside"
    # A restart (a fresh in-memory replay) ingests the good shards again and sets nothing aside.
    with Replay(any_store, SETTINGS, newest_version=lambda: NEWEST_VERSION) as again:
        report = again.ingest()
    assert (report.quarantined, report.episodes) == (0, len(good))


def test_a_version_published_after_the_replay_cached_the_newest_is_asked_for() -> None:
    from storage.replay_ingest import NewestVersion

    published = [3]
    newest = NewestVersion(lambda: published[-1], known=3)
    assert newest.bound(2) == 3
    published.append(4)  # the learner (or another) published since
    assert newest.bound(4) == 4
    assert newest.bound(9) == 4  # asked, and still does not exist
    assert NewestVersion(None).bound(10**9) is None  # no registry: only the schema's bound


def test_a_registry_that_cannot_answer_leaves_the_shard_for_the_next_scan(local_store: Store) -> None:
    fill(local_store, 3, flush=3)  # version 1 everywhere
    answers: list[int | Exception] = [ConnectionError("registry down"), 1]

    def newest() -> int:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    with Replay(local_store, SETTINGS, newest_version=newest) as replay:
        first = replay.ingest()
        assert (first.quarantined, first.episodes) == (0, 0)  # not the shard's fault: not set aside
        assert replay.ingest().episodes == 3


def test_the_text_bomb_is_refused_by_size_without_decoding_it(local_store: Store) -> None:
    """0.5 MB on disk, 2 GB decoded: refused in a fresh process whose peak RSS stays small."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.shard_probes", "bomb", local_store.uri],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert "quarantined=1" in done.stdout and "MAX_SHARD_BYTES" in done.stderr
    peak_mb = float(done.stdout.rsplit("peak RSS ", 1)[1].split()[0])
    assert peak_mb < MAX_SHARD_BYTES / 2**20 / 2, done.stdout  # far below what decoding would take


def test_special_files_are_skipped_unopened_and_names_printed_escaped(local_store: Store, caplog) -> None:
    good = fill(local_store, 6)
    planted = plant_special_files(local_store)
    with caplog.at_level(logging.WARNING, logger="storage.catalog"), Replay(local_store, SETTINGS) as replay:
        report = replay.ingest()  # a FIFO opened for reading would block here
    assert report.episodes == len(good) and report.quarantined == len(planted)
    for record in caplog.records:
        message = record.getMessage()
        assert "\x1b" not in message and "\n" not in message, message
    assert any("evil\\x1b]0;owned\\x07\\x0aERROR" in r.getMessage() for r in caplog.records)
    with Replay(local_store, SETTINGS) as again:  # restart: the skipped are skipped again, never moved
        assert again.ingest().episodes == len(good)
    assert all(
        Path(p).is_symlink() or Path(p).exists() for p, kind in planted.items() if "escape" not in kind
    )


def test_sql_leaves_special_files_out_and_counts_a_restored_copy_once(local_store: Store) -> None:
    fill(local_store, 6)
    planted = plant_special_files(local_store)
    session = open_sql(local_store)  # in this process too: nothing blocks
    steps = session.query("SELECT count(*) FROM steps").column(0)[0].as_py()
    session.close()
    shard = next(s.path for s in list_shards(local_store) if "/c0-" in s.path)
    shutil.copy(shard, Path(shard).with_name("restored-000000-copy.parquet"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ops.cli",
            "sql",
            "SELECT count(*) FROM steps",
            "--store",
            local_store.uri,
            "--format",
            "csv",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,  # a FIFO opened would hang it
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(Path(local_store.root).parent)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == str(steps), done.stdout  # the copy's steps are not counted again
    warnings = done.stderr.splitlines()
    assert "\x1b" not in done.stderr
    for path, kind in planted.items():  # once each (the readable shard with the odd name is read)
        if "escape" in kind:
            continue
        escaped = path.replace("\x1b", "\\x1b").replace("\x07", "\\x07").replace("\n", "\\x0a")
        assert sum(escaped in line for line in warnings) == 1, (escaped, warnings)
    assert all(line.startswith("warning: ") for line in warnings), warnings


def test_the_probe_finds_nothing_lost_unnamed_or_out_of_range(local_store: Store) -> None:
    probe = hostile_ingest_probe(local_store, bomb=False)
    assert (probe.lost, probe.unnamed, probe.out_of_range, probe.crashed, probe.refailed) == (
        0,
        0,
        0,
        0,
        0,
    ), probe.detail


@pytest.mark.slow  # MLflow on SQLite and a tiny policy
def test_the_learner_trains_past_a_nan_shard_and_an_unpublished_version(
    tmp_path, monkeypatch, local_store: Store, make_policy
) -> None:
    """Before: the NaN reward failed the first block (`priorities must be finite`) at every restart."""
    from distrl_core.policy import save_policy
    from storage.registry import PolicyRegistry
    from tasks.learner import LearnerParams, close_learner, ingest_shards, open_learner, train_block

    monkeypatch.setenv("DISTRL_STORE_URI", local_store.uri)
    monkeypatch.setenv("DISTRL_MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("DISTRL_MLFLOW_CACHE_DIR", str(tmp_path / "policy-cache"))
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    registry = PolicyRegistry()
    save_policy(make_policy(), tmp_path / "v")
    assert registry.publish(tmp_path / "v", run_id=registry.start_run("learner")) == 1
    good = fill(local_store, 6)  # version 1
    hostile = hostile_shards(local_store)
    chosen = {k: hostile[k] for k in hostile if "/nan_reward-" in k or "/unpublished_version-" in k}
    for path, (payload, _) in chosen.items():
        atomic_put(local_store, path, payload)  # versions 1 and 6: 6 was never published
    params = LearnerParams(algorithm="aride", batch_size=2, background_ingest=False)
    session = open_learner(params, ReplaySettings(min_size_steps=1, samples_per_insert=None))
    try:
        report = ingest_shards.fn(session)
        assert report["quarantined"] == 2 and report["episodes"] == len(good)
        metrics = train_block.fn(session, updates=2)
        assert session.learner.updates == 2, metrics
    finally:
        close_learner(session)


def test_pages_too_large_uncompressed_are_refused_from_the_footer() -> None:
    """A shard without dictionary encoding declares its pages' size in the footer: refused unread."""
    import io

    import numpy as np
    import pyarrow.parquet as pq

    from storage.catalog import check_footer_sizes
    from storage.schema import SchemaError
    from storage.synthetic import synthetic_episode

    sink = io.BytesIO()
    pq.write_table(synthetic_episode(np.random.default_rng(5), n_steps=40), sink, use_dictionary=False)
    metadata = pq.ParquetFile(io.BytesIO(sink.getvalue())).metadata
    check_footer_sizes(metadata, "shard")  # far below the real bounds
    with pytest.raises(SchemaError, match=r"uncompressed; at most 2000 \(MAX_SHARD_BYTES\)"):
        check_footer_sizes(metadata, "shard", max_bytes=2_000)
    with pytest.raises(SchemaError, match=r"40 rows; at most 39 \(MAX_SHARD_ROWS\)"):
        check_footer_sizes(metadata, "shard", max_rows=39)


def test_a_shard_that_alone_exceeds_the_replay_memory_limit_is_quarantined(local_store: Store) -> None:
    from storage.sql_limits import SqlSettings

    good = fill(local_store, 3, flush=3)
    big = hostile_shards(local_store)  # any shard will do; give it 8 MB of text
    path = next(iter(big)).replace("nan_reward", "large")
    from bench.shard_probes import text_bomb

    atomic_put(local_store, path, text_bomb(rows=400, value_bytes=40_000))  # 16 MB decoded
    limits = SqlSettings(memory_limit="8MB", max_spill=0)
    with Replay(local_store, SETTINGS, limits=limits) as replay:
        report = replay.ingest()
        reasons = dict(
            replay.con.execute("SELECT path, reason FROM shards WHERE status = 'quarantined'").fetchall()
        )
    assert report.episodes == len(good) and set(reasons) == {path}
    assert "DISTRL_SQL_MEMORY_LIMIT" in reasons[path] or "DISTRL_SQL_MAX_SPILL" in reasons[path]
