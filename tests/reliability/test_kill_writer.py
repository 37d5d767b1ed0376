"""Killed shard writers: SIGKILL never leaves a corrupt shard or loses an
acknowledged episode, and the temp files of killed writers are swept, never a live writer's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.probes import kill_writer_loop
from storage.catalog import list_shards
from storage.store import Store, sweep_stale_temps

ROOT = Path(__file__).resolve().parents[2]

# A writer that stops for good once its temp file is complete (fsync never returns), as if it
# were still busy writing a large shard.
_STUCK_WRITER = """
import os, sys, time
import storage.store as s
os.fsync = lambda fd: (print("writing", flush=True), time.sleep(3600))
s.atomic_put(s.open_store(sys.argv[1]), s.open_store(sys.argv[1]).path("trajectories", "x.parquet"), b"x" * 1000)
"""


def test_a_live_writers_temp_is_kept_and_a_killed_ones_swept(local_store: Store, tmp_path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _STUCK_WRITER, local_store.uri],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "writing"
        (temp,) = Path(local_store.root).rglob(".*.tmp")
        assert f".{child.pid}@" in temp.name
        assert sweep_stale_temps(local_store, min_age_s=0) == []  # its writer is alive
        assert temp.exists()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert sweep_stale_temps(local_store, min_age_s=3600) == []  # too young for the default age
    assert sweep_stale_temps(local_store, min_age_s=0) == [temp.as_posix()]
    assert not temp.exists() and list_shards(local_store) == []


def test_temps_without_a_writer_name_wait_for_the_foreign_age(local_store: Store) -> None:
    folder = Path(local_store.trajectories)
    folder.mkdir(parents=True)
    old = folder / ".a.parquet.0123abcd.tmp"  # the naming before this change: no pid, no host
    other_host = folder / ".b.parquet.0123abcd.4242@elsewhere.tmp"
    for temp in (old, other_host):
        temp.write_bytes(b"x")
    assert sweep_stale_temps(local_store, min_age_s=0) == []
    two_days_ago = time.time() - 2 * 86_400
    for temp in (old, other_host):
        os.utime(temp, (two_days_ago, two_days_ago))
    assert sorted(sweep_stale_temps(local_store, min_age_s=0)) == sorted(
        [old.as_posix(), other_host.as_posix()]
    )


@pytest.mark.slow
@pytest.mark.parametrize("store_kind", ["local", "s3"])
def test_kill_9_loop(store_kind: str, request, tmp_path) -> None:
    store: Store = request.getfixturevalue(f"{store_kind}_store")
    report = kill_writer_loop(store, kills=3, kb=1024, seed=1, work=tmp_path)
    assert report.crashed == 0 and report.acked >= report.kills
    assert (report.corrupt, report.lost, report.leaked) == (0, 0, 0), report
