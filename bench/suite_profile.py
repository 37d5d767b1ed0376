"""Where the test suite's time goes: wall and CPU seconds per test, per tier, and for the whole run.

    python -m bench.suite_profile --workers 2 --out suite_profile      # runs the suite (as `make test`)
    python -m bench.suite_profile --rows a.json b.json --out NAME      # summarises recorded rows
    python -m bench.suite_profile --rows DIR/*.json --file-seconds tests/suite_seconds.txt

`--file-seconds` also writes each test file's seconds (its tests' wall seconds, added), the files of
10 s or more, longest first: tests/conftest.py hands the files to the pytest-xdist workers in
that order (longest processing time first).

Writes bench/results/NAME.json: the run's wall time and load, each tier's (top-level folder of
tests/) test count, wall and CPU seconds, and the slowest tests with their CPU/wall ratio (a test
far below 1 waits on servers, sockets or sleeps; the other worker can use the core meanwhile).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from bench._common import RESULTS, machine

SLOWEST = 30
FILE_SECONDS_MIN = 10.0
FILE_SECONDS_HEADER = """\
# Seconds of each test file (its tests' wall seconds, added) in one recorded `make test` run, the
# files of 10 s or more, longest first. tests/conftest.py hands files to the pytest-xdist workers
# in this order (longest processing time first), then the files not listed. Regenerate from a run's
# rows: python -m bench.suite_profile --rows <SUITE_TIMING_DIR>/*.json --file-seconds <this file>
"""


def tier(nodeid: str) -> str:
    """`tests/flows/test_run.py::test_x` → `tests/flows`; a file directly in tests/ is its own tier."""
    parts = nodeid.partition("::")[0].split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0] + "/*.py"


def summarise(rows: dict[str, tuple[float, float]], wall_s: float | None) -> dict:
    tiers: dict[str, dict[str, float]] = defaultdict(lambda: {"tests": 0, "wall_s": 0.0, "cpu_s": 0.0})
    for nodeid, (wall, cpu) in rows.items():
        row = tiers[tier(nodeid)]
        row["tests"] += 1
        row["wall_s"] += wall
        row["cpu_s"] += cpu
    slowest = sorted(rows.items(), key=lambda kv: -kv[1][0])[:SLOWEST]
    return {
        "tests": len(rows),
        "run_wall_s": wall_s,
        "sum_test_wall_s": round(sum(w for w, _ in rows.values()), 1),
        "sum_test_cpu_s": round(sum(c for _, c in rows.values()), 1),
        "tiers": {
            name: {k: round(v, 1) for k, v in row.items()}
            for name, row in sorted(tiers.items(), key=lambda kv: -kv[1]["wall_s"])
        },
        "slowest": [
            {"test": nodeid, "wall_s": round(w, 1), "cpu_s": round(c, 1), "cpu_per_wall": round(c / w, 2)}
            for nodeid, (w, c) in slowest
            if w > 0
        ],
    }


def file_seconds(rows: dict[str, tuple[float, float]]) -> str:
    """The text of tests/suite_seconds.txt: `seconds path` per line, longest first."""
    files: dict[str, float] = defaultdict(float)
    for nodeid, (wall, _) in rows.items():
        files[nodeid.partition("::")[0]] += wall
    longest = sorted(
        ((s, f) for f, s in files.items() if s >= FILE_SECONDS_MIN), key=lambda sf: (-sf[0], sf[1])
    )
    return FILE_SECONDS_HEADER + "".join(f"{s:.0f} {f}\n" for s, f in longest)


def run_suite(workers: int, extra: list[str]) -> tuple[dict[str, tuple[float, float]], float, int]:
    with tempfile.TemporaryDirectory(prefix="suite-timing-") as folder:
        parallel = ["-n", str(workers), "--dist", "loadfile", "--no-loadscope-reorder"] if workers else []
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "bench._suite_timing", *parallel, *extra]
        start = time.perf_counter()
        code = subprocess.call(argv, env={**os.environ, "SUITE_TIMING_DIR": folder})
        wall = time.perf_counter() - start
        rows: dict[str, tuple[float, float]] = {}
        for part in Path(folder).glob("*.json"):
            rows.update({k: (w, c) for k, (w, c) in json.loads(part.read_text()).items()})
    return rows, wall, code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (0: one process)")
    parser.add_argument(
        "--rows", nargs="*", type=Path, help="summarise these recorded files instead of running"
    )
    parser.add_argument("--wall-s", type=float, help="with --rows: the run's own wall time, if known")
    parser.add_argument("--note", default="", help="what else ran on the machine (load), kept in the JSON")
    parser.add_argument("--out", default="suite_profile", help="the JSON's name, without .json")
    parser.add_argument("--results-dir", type=Path, default=RESULTS)
    parser.add_argument(
        "--file-seconds", type=Path, help="also write each file's seconds here (tests/suite_seconds.txt)"
    )
    parser.add_argument("pytest_args", nargs="*", help="after `--`: more pytest arguments")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    code = 0
    if args.rows:
        rows: dict[str, tuple[float, float]] = {}
        for path in args.rows:
            rows.update({k: (w, c) for k, (w, c) in json.loads(path.read_text()).items()})
        wall: float | None = args.wall_s
    else:
        rows, wall, code = run_suite(args.workers, args.pytest_args)
    result = {
        "workers": args.workers,
        "exit_code": code,
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "note": args.note,
        "machine": machine(),
        **summarise(rows, wall and round(wall, 1)),
    }
    if args.file_seconds:
        args.file_seconds.write_text(file_seconds(rows))
    out = args.results_dir / f"{args.out}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{out}: {result['tests']} tests, run {result['run_wall_s']} s, CPU {result['sum_test_cpu_s']} s")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
