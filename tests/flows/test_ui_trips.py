"""What a Prefect or MLflow user meets, without servers: `distrl up`'s database default, text that
Prefect's markdown renderer would swallow, and prefect.yaml's algorithm lists against the code's."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml

from distrl_core.learner.config import ALGORITHMS
from ops import postgres
from ops.up_config import UpConfig
from tasks.curve_links import markdown_text

ROOT = Path(__file__).resolve().parents[2]


def test_auto_falls_back_to_sqlite_with_a_note_when_postgres_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.delenv("DISTRL_POSTGRES_URL", raising=False)
    monkeypatch.setenv("DISTRL_POSTGRES_BIN_DIR", str(empty))
    planned, note = postgres.plan_default(tmp_path)
    assert planned is None
    assert "make postgres-deps" in note and "SQLite" in note and "\n" not in note


def test_auto_takes_the_configured_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTRL_POSTGRES_URL", "postgresql://distrl:pw@127.0.0.1:5544")
    planned, note = postgres.plan_default(tmp_path)
    assert isinstance(planned, postgres.Server) and planned.port == 5544 and note == ""


def test_auto_takes_installed_programs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "initdb").write_text("")
    monkeypatch.delenv("DISTRL_POSTGRES_URL", raising=False)
    monkeypatch.setenv("DISTRL_POSTGRES_BIN_DIR", str(bin_dir))
    monkeypatch.setenv("DISTRL_POSTGRES_OS_USER", "root")  # exists everywhere; used only as root
    planned, note = postgres.plan_default(tmp_path)
    assert isinstance(planned, postgres.LocalPostgres) and note == ""


def test_auto_is_the_default() -> None:
    assert UpConfig().database == "auto"


def test_markdown_text_keeps_angle_brackets_visible() -> None:
    text = markdown_text("held-out curve of <training run> & co")
    assert "<" not in text and ">" not in text
    assert text == "held-out curve of &lt;training run&gt; &amp; co"


def test_prefect_yaml_lists_every_algorithm_the_learner_accepts() -> None:
    text = (ROOT / "prefect.yaml").read_text()
    comments = re.findall(r"algorithm: \w+\s+# ([\w |]+?) \(", text)
    assert len(comments) == 2, comments  # learn and retrain
    for listed in comments:
        assert tuple(a.strip() for a in listed.split("|")) == ALGORITHMS
    for deployment in yaml.safe_load(text)["deployments"]:
        algorithm = (deployment.get("parameters", {}).get("params") or {}).get("algorithm")
        assert algorithm is None or algorithm in ALGORITHMS


def test_retrain_runs_are_named_for_what_they_do() -> None:
    from flows.retrain import RetrainParams, run_name

    defaults = RetrainParams()
    given = {"algorithm": "gigpo", "recent_days": 3}
    assert run_name(given) == f"retrain-gigpo-from-{defaults.start_policy}-3d-{defaults.updates}-updates"
    assert run_name(RetrainParams(start_policy="7", updates=50)).startswith(
        f"retrain-{defaults.algorithm}-from-7-"
    )
    assert run_name(None) == run_name(defaults)


def _private_stack_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, user: str) -> Path:
    """A stack folder under a private parent (as /root is), PostgreSQL's user set to `user`."""
    private = tmp_path / "private"
    (private / "up").mkdir(parents=True)
    private.chmod(0o700)
    monkeypatch.delenv("DISTRL_POSTGRES_URL", raising=False)
    monkeypatch.setenv("DISTRL_POSTGRES_OS_USER", user)
    return private / "up"


@pytest.mark.skipif(os.geteuid() != 0, reason="PostgreSQL runs as another user only when started as root")
def test_a_folder_the_server_user_cannot_enter_puts_the_cluster_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "initdb").write_text("")
    monkeypatch.setenv("DISTRL_POSTGRES_BIN_DIR", str(bin_dir))
    run_dir = _private_stack_folder(tmp_path, monkeypatch, "nobody")
    planned, note = postgres.plan_default(run_dir)
    assert isinstance(planned, postgres.LocalPostgres)
    assert planned.root == postgres.cluster_outside(run_dir) and run_dir not in planned.root.parents
    assert "'nobody'" in note and "cannot enter" in note and str(planned.root) in note and "\n" not in note
    direct = postgres.plan(run_dir)  # what `--database postgres` starts: apart as well, one password
    assert isinstance(direct, postgres.LocalPostgres) and direct.root == planned.root
    assert direct.data == planned.root / "data"
    # a temporary folder the user cannot reach either: SQLite, saying why
    shut = tmp_path / "shut"
    shut.mkdir(mode=0o700)
    monkeypatch.setattr(postgres.tempfile, "tempdir", str(shut))
    planned, note = postgres.plan_default(run_dir)
    assert planned is None and "'nobody'" in note and "SQLite" in note
    assert (
        postgres.plan(run_dir).root == run_dir / "postgres"
    )  # nowhere apart: `--database postgres` names it on start


@pytest.mark.skipif(os.geteuid() != 0, reason="PostgreSQL runs as another user only when started as root")
def test_the_cluster_apart_starts_answers_and_starts_empty_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    try:
        postgres.find_bin_dir(postgres.PostgresSettings().bin_dir)
    except postgres.PostgresMissing as exc:
        pytest.skip(str(exc))
    user = postgres.PostgresSettings().os_user
    if not postgres._user_exists(user):
        pytest.skip(f"no user {user!r} to run PostgreSQL as")
    run_dir = _private_stack_folder(tmp_path, monkeypatch, user)
    for _ in range(2):  # the second start finds the first one's cluster and must begin afresh
        planned, _note = postgres.plan_default(run_dir)
        assert isinstance(planned, postgres.LocalPostgres)
        server, proc = postgres.start_database(planned, run_dir, timeout_s=120)
        assert proc is not None
        try:
            with postgres.connect(server) as conn:
                names = {row[0] for row in conn.execute("select datname from pg_database")}
            assert {postgres.PREFECT_DB, postgres.MLFLOW_DB} <= names, names
        finally:
            postgres.stop_server(proc)
    assert (run_dir / "logs" / "postgres.log").exists() and planned.root.exists()
    postgres.remove_cluster_apart(run_dir)  # as the stack does once its server stopped
    assert not planned.root.exists()
