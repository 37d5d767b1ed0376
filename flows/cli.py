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
    from flows.demo import run_demo

    run_demo(minutes=args.minutes, collectors=args.collectors, sync=args.sync)
    return 0


def _cmd_train_local(args: argparse.Namespace) -> int:
    from flows.embedded import configure_embedded

    configure_embedded(args.home)
    from flows.train_local import TrainLocalParams, train_local

    result = train_local(TrainLocalParams(collectors=args.collectors, minutes=args.minutes, sync=args.sync))
    result.pop("history", None)
    print(json.dumps(result, indent=2, default=str))
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from flows.embedded import configure_embedded

    configure_embedded(args.home)
    from flows.evaluate import evaluate
    from tasks.evaluation import report_markdown

    report = evaluate(policy=args.policy, split=args.split)
    print(report_markdown(report))
    print(f"champion {'moved to' if report['promoted'] else 'stays; not better than'} this version")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    from flows.embedded import configure_embedded

    configure_embedded(args.home)
    from flows.status import status_report

    print(status_report())
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

    demo = sub.add_parser("demo", help="embedded run: warm start, async A-RIDE, held-out evaluation, plot")
    demo.add_argument("--minutes", type=float, default=6.0, help="minutes of RL after the warm start")
    demo.add_argument("--collectors", type=int, default=4)
    demo.add_argument("--sync", action="store_true", help="DigiRL-style synchronous rounds instead")
    demo.set_defaults(func=_cmd_demo)

    home_help = "folder of the embedded store, MLflow database and Prefect home (env variables win)"
    local = sub.add_parser("train-local", help="collectors and learner in this process, resuming from latest")
    local.add_argument("--minutes", type=float, default=10.0)
    local.add_argument("--collectors", type=int, default=4)
    local.add_argument("--sync", action="store_true")
    local.add_argument("--home", default=".distrl", help=home_help)
    local.set_defaults(func=_cmd_train_local)

    evaluate = sub.add_parser("evaluate", help="evaluate a policy version on the held-out split")
    evaluate.add_argument("--policy", default="latest", help="alias or version number")
    evaluate.add_argument("--split", default="test")
    evaluate.add_argument("--home", default=".distrl", help=home_help)
    evaluate.set_defaults(func=_cmd_evaluate)

    status = sub.add_parser("status", help="policy versions, pools, replay size, last evaluation")
    status.add_argument("--home", default=".distrl", help=home_help)
    status.set_defaults(func=_cmd_status)

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
