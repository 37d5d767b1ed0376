"""`distrl sql` against the known bypasses, on a local and a moto S3 store.

Every attack must exit 2 with a one-line refusal, write nothing (in the working folder, the store or
the bucket) and print no secret; the legitimate forms of EXPLAIN must keep working.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.probes import SQL_ALLOWED as ALLOWED
from bench.probes import SQL_ATTACKS as ATTACKS
from ops.cli import main as cli
from storage.sql_views import ReadOnlyError, open_sql
from storage.store import Store
from tests.reliability.conftest import fill

ROOT = Path(__file__).resolve().parents[2]


def _files(store: Store, cwd: Path) -> set[str]:
    store.fs.invalidate_cache()
    inside = set(store.fs.find(store.root)) if store.fs.exists(store.root) else set()
    return inside | {str(p) for p in cwd.rglob("*")}


@pytest.mark.parametrize("store_kind", ["local", "s3"])
def test_attacks_are_refused_and_write_nothing(
    store_kind: str, request, tmp_path, monkeypatch, capsys, canaries
) -> None:
    store: Store = request.getfixturevalue(f"{store_kind}_store")
    fill(store)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (tmp_path / "outside.txt").write_text(canaries[0])
    before = _files(store, work)
    session = open_sql(store)  # one session: opening one per query costs a listing of the bucket each
    for attack in ATTACKS:
        query = attack.format(store=store.url(store.root))
        with pytest.raises(ReadOnlyError, match="refused") as refused:
            session.query(query)
        assert not any(secret in str(refused.value) for secret in canaries), query
        assert _files(store, work) == before, f"{query} wrote a file"
    for query in ALLOWED:
        assert session.query(query.format(store=store.url(store.root))).num_rows >= 1, query
    session.close()
    # The command line: exit code 2, one line, no traceback.
    for query in (ATTACKS[0], ATTACKS[6]):
        assert cli(["sql", query, "--store", store.uri]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("error: refused") and err.count("\n") == 1, err
    assert cli(["sql", "EXPLAIN (FORMAT json) SELECT 1", "--store", store.uri]) == 0
    assert _files(store, work) == before


@pytest.mark.parametrize("store_kind", ["local", "s3"])
def test_the_environment_cannot_be_read(store_kind: str, request, tmp_path) -> None:
    """In a child process, so that the canaries are in its /proc/self/environ."""
    store: Store = request.getfixturevalue(f"{store_kind}_store")
    fill(store, 3)
    env = dict(os.environ, DISTRL_JUDGE_API_KEY="sk-environ-canary-0451", PYTHONPATH=str(ROOT))
    query = "SELECT content FROM read_text('/proc/self/environ')"
    done = subprocess.run(
        [sys.executable, "-m", "ops.cli", "sql", query, "--store", store.uri, "--format", "csv"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, "the environment was read"  # (its text would leak into the log)
    for secret in (
        "sk-environ-canary-0451",
        os.environ.get("AWS_SECRET_ACCESS_KEY") or "sk-environ-canary-0451",
    ):
        assert secret not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
