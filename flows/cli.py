"""The `distrl` command line. Imports are local to each command so that `distrl sql` starts fast."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path


def _cmd_sql(args: argparse.Namespace) -> int:
    from storage.sql_output import write_result
    from storage.sql_views import ReadOnlyError, open_sql
    from storage.store import open_store

    session = open_sql(open_store(args.store))
    try:
        table = session.query(args.query)
    except ReadOnlyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # DuckDB errors name the column/table; show them without a traceback
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        session.close()
    for bad in session.skipped:
        print(f"warning: left out unreadable shard {bad.path}: {bad.reason}", file=sys.stderr)
    write_result(table, args.format, Path(args.out) if args.out else None, max_rows=args.max_rows)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from flows.store_walkthrough import run_walkthrough

    summary = run_walkthrough(store_uri=args.store, collectors=args.collectors, episodes=args.episodes)
    print(json.dumps(summary, indent=2))
    return 0


def _cmd_fake_adb(args: argparse.Namespace) -> int:
    from distrl_core.envs.fake_adb import run_fake_adb

    run_fake_adb(port=args.port, devices=args.devices, seed=args.seed, host=args.host)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="distrl", description="Asynchronous distributed RL for phone agents."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)

    sql = sub.add_parser("sql", help="run a read-only SQL query over the trajectory store")
    sql.add_argument("query", help='e.g. "SELECT family, avg(success) FROM episodes GROUP BY 1"')
    sql.add_argument("--store", default=None, help="store URI (default: $DISTRL_STORE_URI or .distrl/store)")
    sql.add_argument("--format", choices=["table", "csv", "json", "parquet"], default="table")
    sql.add_argument("--out", default=None, help="write to this file instead of standard output")
    sql.add_argument("--max-rows", type=int, default=50, help="rows shown by --format table")
    sql.set_defaults(func=_cmd_sql)

    demo = sub.add_parser("demo", help="walk through the trajectory store (write, sample by priority, SQL)")
    demo.add_argument("--store", default=None, help="store URI (default: $DISTRL_STORE_URI or .distrl/store)")
    demo.add_argument("--collectors", type=int, default=4)
    demo.add_argument("--episodes", type=int, default=200, help="episodes per collector")
    demo.set_defaults(func=_cmd_demo)

    fake = sub.add_parser("fake-adb", help="serve SimDroid devices over the real ADB wire protocol")
    fake.add_argument("--port", type=int, default=5037)
    fake.add_argument("--devices", type=int, default=1)
    fake.add_argument("--seed", type=int, default=0)
    fake.add_argument("--host", default="127.0.0.1")
    fake.set_defaults(func=_cmd_fake_adb)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
