"""The bad-shard zoo against `distrl sql` and the learner's replay: every bad
shard is named and left out (never moved by SQL), and both keep answering from the others."""

from __future__ import annotations

from bench.probes import bad_shards
from ops.cli import main as cli
from storage.catalog import list_shards
from storage.replay import Replay
from storage.replay_config import ReplaySettings
from storage.sql_views import open_sql
from storage.store import Store, atomic_put
from tests.reliability.conftest import fill


def _store_with_zoo(store: Store) -> tuple[list[str], dict[str, bytes]]:
    good = fill(store, 6)
    zoo = bad_shards(store)
    for path, payload in zoo.items():
        atomic_put(store, path, payload)
    return good, zoo


def test_sql_names_each_bad_shard_and_answers_from_the_others(any_store: Store, capsys) -> None:
    good, zoo = _store_with_zoo(any_store)
    session = open_sql(any_store)
    assert session.query("SELECT count(*) AS n FROM episodes").column(0)[0].as_py() == len(good)
    assert session.query("SELECT count(DISTINCT step) AS n FROM steps").column(0)[0].as_py() >= 2
    assert {b.path for b in session.skipped} == set(zoo)
    session.close()
    assert {s.path for s in list_shards(any_store)} >= set(zoo), "a reader must not move shards"
    # The command line: exit 0, the answer, one warning per bad file naming it.
    assert (
        cli(["sql", "SELECT count(*) AS n FROM episodes", "--store", any_store.uri, "--format", "csv"]) == 0
    )
    out, err = capsys.readouterr()
    assert out.splitlines()[-1] == str(len(good))
    for path in zoo:
        assert any(path in line and line.startswith("warning:") for line in err.splitlines()), path


def test_a_bad_data_page_found_mid_query_is_reported_once(local_store: Store) -> None:
    _, zoo = _store_with_zoo(local_store)
    session = open_sql(local_store)  # footers only: the damaged pages pass this check
    page_damaged = {p for p in zoo if "_pages" in p}
    assert not page_damaged & {b.path for b in session.skipped}
    rows = session.query("SELECT * FROM steps").num_rows
    assert page_damaged <= {b.path for b in session.skipped}
    assert session.query("SELECT count(*) FROM steps").column(0)[0].as_py() == rows
    session.close()


def test_the_learner_quarantines_the_zoo(any_store: Store) -> None:
    good, zoo = _store_with_zoo(any_store)
    replay = Replay(any_store, ReplaySettings(min_size_steps=1))
    report = replay.ingest()
    assert report.quarantined == len(zoo) and report.episodes == len(good)
    replay.close()
