"""Secrets from every source are scrubbed: keys from a shared credentials
file (not the environment) were printed by `-vv` 14 times (the session token) and 7 times (the key
id); a password in a URI's userinfo was printed by `distrl status`."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

from bench.probes import debug_sql_count
from storage.secrets import redact
from storage.store import RedactSecrets, Store
from tests.reliability.conftest import fill

ROOT = Path(__file__).resolve().parents[2]
FILE_KEY_ID = "AKIAFILEONLYCANARY01"
FILE_SECRET = "file-only-secret-canary-9b8a7c6d5e"
FILE_TOKEN = "IQoJb3JpZ2luX2VjFILEONLYSESSIONTOKENCANARY42"


def test_debug_logs_hold_no_key_from_a_credentials_file(s3_store: Store, tmp_path) -> None:
    fill(s3_store, 3)
    credentials = tmp_path / "credentials"
    credentials.write_text(
        f"[default]\naws_access_key_id = {FILE_KEY_ID}\naws_secret_access_key = {FILE_SECRET}\n"
        f"aws_session_token = {FILE_TOKEN}\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    env |= {"PYTHONPATH": str(ROOT), "AWS_SHARED_CREDENTIALS_FILE": str(credentials), "HOME": str(tmp_path)}
    done = debug_sql_count(s3_store.uri, env, tmp_path, timeout_s=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-3] == "3"
    assert "<AWS_ACCESS_KEY_ID>" in done.stderr, "the file's keys were not used: the probe proves nothing"
    output = done.stdout + done.stderr
    assert {s: output.count(s) for s in (FILE_KEY_ID, FILE_SECRET, FILE_TOKEN)} == dict.fromkeys(
        (FILE_KEY_ID, FILE_SECRET, FILE_TOKEN), 0
    )


def test_uri_userinfo_is_masked_in_text_and_log_records() -> None:
    text = (
        "tracking https://alice:pa55w0rd-canary@mlflow.example.com/ and postgresql://bob:hunter2x@db:5432/x"
    )
    assert "pa55w0rd-canary" not in redact(text) and "hunter2x" not in redact(text)
    assert (
        "https://***@mlflow.example.com/" in redact(text) and redact("s3://bucket/key") == "s3://bucket/key"
    )
    record = logging.LogRecord(
        "x", logging.INFO, __file__, 1, "connecting to %s", ("http://u:tok3n-canary@h",), None
    )
    RedactSecrets().filter(record)
    assert "tok3n-canary" not in record.getMessage()


def test_status_shows_no_password_of_the_tracking_uri(tmp_path, monkeypatch) -> None:
    """`distrl status` prints the registry's URI; here one with a password, of a server that is not
    there: the command fails, and neither its output nor its error shows the password."""
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        DISTRL_MLFLOW_TRACKING_URI="http://alice:pa55w0rd-canary@127.0.0.1:9/",
        MLFLOW_HTTP_REQUEST_MAX_RETRIES="0",
        MLFLOW_HTTP_REQUEST_TIMEOUT="2",
    )
    done = subprocess.run(
        [sys.executable, "-m", "ops.cli", "status", "--home", str(tmp_path / "home")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "pa55w0rd-canary" not in done.stdout + done.stderr, (done.stdout + done.stderr)[-3000:]
