"""`distrl sql`'s hard time limit: how soon a query deaf to DuckDB's interrupt ends, and what the
child process costs a trivial query.

- `lpad`: `SELECT length(lpad('x', 1200000000, 'y'))` (455 s past a 20 s limit when only DuckDB's
  interrupt stopped queries) at `--limit` seconds: the command's wall time, and the time from the
  query's start in the child to the command's return (`run_sql_child` measured in this process).
- `trivial`: `distrl sql "SELECT 42"` on a small store, `--repeats` times, as a person runs it (a new
  process each time); with `--baseline-tree DIR` (a checkout of the code before the child process,
  e.g. `git archive <commit> ops storage flows tasks simulators distrl_core | tar -x -C DIR`) the
  same command from that tree, interleaved, so both see the same load.

    .venv/bin/python -m bench.sql_hard_limit [--limit 2] [--repeats 15] [--baseline-tree DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._common import machine, write_result

LPAD = "SELECT length(lpad('x', 1200000000, 'y')) AS n"
TRIVIAL = "SELECT 42 AS answer"


def _distrl(query: str, store: str, env: dict[str, str], cwd: str | None = None) -> tuple[float, int, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ops.cli", "sql", query, "--store", store],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=False,
    )
    return time.perf_counter() - started, done.returncode, done.stderr.strip()


def _lpad_in_process(store: str, limit: float) -> dict:
    """From the query's start (the child's `started`) to the return, with the kill flag."""
    import io

    from ops import sql_child
    from storage.sql_limits import SqlSettings

    events_next = sql_child._Events.next
    marks: dict[str, float] = {}

    def timed_next(self: sql_child._Events, timeout_s: float | None) -> dict:
        event = events_next(self, timeout_s)
        marks.setdefault(str(event.get("event")), time.perf_counter())
        return event

    sql_child._Events.next = timed_next  # type: ignore[method-assign]  # a bench's stopwatch only
    try:
        outcome = sql_child.run_sql_child(
            sql_child.SqlJob(LPAD, store, "csv", None, 50),
            SqlSettings(timeout_s=limit),
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )
        returned = time.perf_counter()
    finally:
        sql_child._Events.next = events_next  # type: ignore[method-assign]
    return {
        "killed": outcome.killed,
        "code": outcome.code,
        "line": outcome.stderr,
        "from_query_start_s": round(returned - marks["started"], 3),
        "past_limit_s": round(returned - marks["started"] - limit, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=float, default=2.0, help="DISTRL_SQL_TIMEOUT_S for the lpad query")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--baseline-tree", default=None, help="the code before the child process")
    parser.add_argument("--out", default="sql_hard_limit")
    args = parser.parse_args()
    before = machine()
    with tempfile.TemporaryDirectory(prefix="bench-sql-limit-") as folder:
        store = os.path.join(folder, "store")
        os.makedirs(store)
        env = os.environ | {"DISTRL_SQL_TIMEOUT_S": str(args.limit)}
        wall, code, line = _distrl(LPAD, store, env)
        lpad = {"command_wall_s": round(wall, 3), "code": code, "line": line} | _lpad_in_process(
            store, args.limit
        )
        times: dict[str, list[float]] = {"child": [], "baseline": []}
        for _ in range(args.repeats):
            times["child"].append(_distrl(TRIVIAL, store, dict(os.environ))[0])
            if args.baseline_tree:
                tree = str(Path(args.baseline_tree).resolve())
                env = os.environ | {"PYTHONPATH": tree}
                times["baseline"].append(_distrl(TRIVIAL, store, env, cwd=tree)[0])
    medians = {k: statistics.median(v) for k, v in times.items() if v}
    trivial: dict[str, object] = {
        k: {"median_s": round(medians[k], 3), "each_s": [round(x, 3) for x in times[k]]} for k in medians
    }
    if "baseline" in medians:
        trivial["extra_median_s"] = round(medians["child"] - medians["baseline"], 3)
    document = {
        "benchmark": "sql_hard_limit",
        "machine": before,
        "loadavg_after": machine()["loadavg_1_5_15"],
        "settings": vars(args),
        "lpad": lpad,
        "trivial": trivial,
    }
    path = write_result(args.out, document)
    print(document)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
