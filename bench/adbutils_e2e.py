"""Run adbutils' own end-to-end tests against the fake ADB server and print the counts.

``python -m bench.adbutils_e2e --suite PATH`` where PATH is a folder of adbutils' e2e tests (its
``e2etests/`` at the tag you want, checked out by you: this script downloads nothing). It starts a
fake server with one device on ``--port`` (5037 by default, because adbutils' ``test_adb.py`` dials
5037 itself; ``ANDROID_ADB_SERVER_PORT`` points the rest there), runs pytest on the folder in a scratch
working directory (``test_record.py`` writes ``output.mp4`` into it) with the installed adbutils, and
prints one JSON line: adbutils' version, the counts and the failing tests.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

from simulators.fake_adb import FakeAdbConfig, FakeAdbServer

_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")


def run_suite(suite: Path, port: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="adbutils-e2e-") as scratch:
        config = FakeAdbConfig(port=port, devices=1, console_auth_token_path=Path(scratch, "console_token"))
        with FakeAdbServer(config) as server:
            env = {**os.environ, "ANDROID_ADB_SERVER_PORT": str(server.port)}
            command = [sys.executable, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider", str(suite)]
            completed = subprocess.run(command, cwd=scratch, env=env, capture_output=True, text=True)
    output = completed.stdout + completed.stderr
    summary = output.strip().splitlines()[-1] if output.strip() else ""
    counts = {
        kind.rstrip("s") if kind.startswith("error") else kind: int(n) for n, kind in _COUNT.findall(summary)
    }
    failures = re.findall(r"^(?:FAILED|ERROR) (\S+)", output, re.MULTILINE)
    return {"adbutils": version("adbutils"), "suite": str(suite), "counts": counts, "failures": failures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--suite", type=Path, required=True, help="a folder of adbutils' e2e tests")
    parser.add_argument(
        "--port", type=int, default=5037, help="the fake server's port (the suite dials 5037)"
    )
    args = parser.parse_args(argv)
    if not args.suite.is_dir():
        parser.error(f"--suite {args.suite} is not a folder: pass a checkout of adbutils' e2etests/")
    print(json.dumps(run_suite(args.suite.resolve(), args.port)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
