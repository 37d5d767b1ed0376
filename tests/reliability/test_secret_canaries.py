"""Secret canaries over DEBUG logs: `distrl -vv sql` against a moto store logs
botocore's request signing, and neither the access key id, the secret key nor the judge key may
appear anywhere in its output."""

from __future__ import annotations

import os
from pathlib import Path

from bench.probes import debug_sql_count
from storage.store import Store
from tests.reliability.conftest import JUDGE_CANARY, fill

ROOT = Path(__file__).resolve().parents[2]


def test_debug_logs_of_sql_on_s3_hold_no_secret(s3_store: Store, canaries: list[str], tmp_path) -> None:
    fill(s3_store, 3)
    env = dict(os.environ, PYTHONPATH=str(ROOT), DISTRL_JUDGE_API_KEY=JUDGE_CANARY)
    done = debug_sql_count(s3_store.uri, env, tmp_path, timeout_s=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-3] == "3"  # the answer, above "(1 rows)"
    assert done.stderr.count(" DEBUG botocore") > 20, "no signing records: the probe would prove nothing"
    hits = {secret: (done.stdout + done.stderr).count(secret) for secret in canaries}
    assert hits == dict.fromkeys(canaries, 0)
