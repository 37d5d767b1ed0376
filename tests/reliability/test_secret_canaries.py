"""Secret canaries over DEBUG logs (issue 12, item 13): `distrl -vv sql` against a moto store logs
botocore's request signing, and neither the access key id, the secret key nor the judge key may
appear anywhere in its output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from storage.store import Store
from tests.reliability.conftest import JUDGE_CANARY, fill

ROOT = Path(__file__).resolve().parents[2]


def test_debug_logs_of_sql_on_s3_hold_no_secret(s3_store: Store, canaries: list[str], tmp_path) -> None:
    fill(s3_store, 3)
    env = dict(os.environ, PYTHONPATH=str(ROOT), DISTRL_JUDGE_API_KEY=JUDGE_CANARY)
    query = "SELECT count(*) AS n FROM episodes"
    done = subprocess.run(
        [sys.executable, "-m", "flows.cli", "-vv", "sql", query, "--store", s3_store.uri],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-3] == "3"  # the answer, above "(1 rows)"
    assert done.stderr.count(" DEBUG botocore") > 20, "no signing records: the probe would prove nothing"
    hits = {secret: (done.stdout + done.stderr).count(secret) for secret in canaries}
    assert hits == dict.fromkeys(canaries, 0)
