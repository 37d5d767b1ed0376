"""The `distrl` command line. Imports are local to each command so that `distrl sql` starts fast."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from ops.cli_errors import (
    Parser,
    busy_port_error,
    device_count,
    failure_line,
    port,
    row_count,
    seed,
    unknown_env_warnings,
    user_error_message,
)
from ops.cli_flows import FLOW_OPTIONS, HOME, demo_params, environment_kept
from ops.cli_run import add_run_parser
from ops.cli_setup import add_pretrained_command, add_setup_commands

if TYPE_CHECKING:
    from ops.up import Stack


def _cmd_sql(args: argparse.Namespace) -> int:
    # The query runs in a child process killed at DISTRL_SQL_TIMEOUT_S (`ops.sql_child`): DuckDB's
    # own interrupt does not stop one long function call. This process imports neither DuckDB nor pyarrow.
    from ops.sql_child import SqlJob, run_sql_child
    from storage.sql_limits import SqlSettings

    settings = SqlSettings()  # a bad DISTRL_SQL_* value is one line here, before a child starts
    job = SqlJob(args.query, args.store, args.format, args.out, args.max_rows, args.verbose)
    outcome = run_sql_child(job, settings)  # prints its lines and the result
    if outcome.system_exit is not None:
        raise SystemExit(outcome.system_exit)
    return outcome.code


def _cmd_demo(args: argparse.Namespace) -> int:
    from ops.demo import run_demo

    run_demo(demo_params(args))
    return 0


def _cmd_train_local(args: argparse.Namespace) -> int:
    from ops.embedded import configure_embedded

    configure_embedded(args.home)
    from flows.train_local import train_local

    result = train_local(args.options.build(args))
    result.pop("history", None)
    print(json.dumps(result, indent=2, default=str))
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from ops.embedded import configure_embedded

    configure_embedded(args.home)
    from flows.evaluate import evaluate
    from tasks.evaluation import report_markdown

    report = evaluate(policy=args.policy, split=args.split)
    print(report_markdown(report))
    print(f"champion {'moved to' if report['promoted'] else 'stays; not better than'} this version")
    return 0


def _cmd_retrain(args: argparse.Namespace) -> int:
    from ops.embedded import configure_embedded

    configure_embedded(args.home)
    from flows.retrain import retrain
    from storage.lease import LeaseHeld, LeaseLost
    from storage.registry import SiblingPublished
    from tasks.retrain import RetrainDataError

    params = args.options.build(args)  # a mistake names the flag and the field
    # Nothing to start from, too little recent data, or another learner on the same replay or parent.
    refused = (LookupError, RetrainDataError, LeaseHeld, LeaseLost, SiblingPublished)
    try:
        result = retrain(params)
    except refused as exc:
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
    from ops.embedded import configure_embedded

    configure_embedded(args.home, prefect=False)  # reads MLflow and the store only
    from ops.status import status_report

    print(status_report())
    return 0


def _cmd_up(args: argparse.Namespace) -> int:
    from ops.up import Stack, UpConfig, down

    # Every role shares this machine's cores: one torch thread per flow run is fastest.
    config: UpConfig = args.options.build(args, worker_env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    if args.down:
        stopped = down(config.run_dir)
        print(
            f"stopped {', '.join(stopped)}"
            if stopped
            else f"nothing of `distrl up` runs from {config.run_dir}"
        )
        return 0
    # Prefect writes its profile under PREFECT_HOME when imported: keep this process's in the run folder.
    os.environ.setdefault("PREFECT_HOME", str(config.run_dir.resolve() / "prefect"))
    try:
        stack = Stack(config)
        stack.outlive_parent = args.detach
    except FileNotFoundError as exc:  # no prefect.yaml here
        print(f"error: {exc}", file=sys.stderr)
        return 1
    _stop_on_signals()
    print(f"starting Prefect, MLflow and S3 (moto) servers, work pools and workers in {config.run_dir} ...")
    return _run_stack(stack, config.run_dir, detach=args.detach)


def _stop_on_signals() -> None:
    """SIGTERM and Ctrl-C both end `distrl up` through KeyboardInterrupt, which stops the stack."""
    import signal

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    # A shell starts background jobs with SIGINT ignored, and Python then leaves it so: restore Ctrl-C.
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _run_stack(stack: Stack, run_dir: Path, *, detach: bool) -> int:
    """Start the stack and watch it until interrupted (then stop it), or leave it running (`detach`)."""
    from storage.secrets import redact

    detached = False
    try:
        try:
            stack.start()
        except (RuntimeError, TimeoutError) as exc:  # already running, a server that would not start...
            print(f"error: {redact(str(exc))}", file=sys.stderr)
            return 1
        print(stack.describe())
        if detach:
            detached = True
            print(f"\nleft running; stop it with: distrl up --down --dir {run_dir}")
            return 0
        print("\nCtrl-C stops everything.")
        _report_exits(stack)
    except KeyboardInterrupt:
        print("\nstopping ...")
        return 0
    finally:
        if not detached:
            stack.stop()


def _report_exits(stack: Stack) -> NoReturn:
    """Warn once about each process of the stack that exits, until interrupted."""
    import time

    reported: set[str] = set()
    while True:
        time.sleep(2)
        for name, proc in stack.procs.items():
            if name not in reported and not proc.alive():
                reported.add(name)
                print(f"warning: {name} exited; see {proc.log_path}", file=sys.stderr)


def _cmd_fake_adb(args: argparse.Namespace) -> int:
    from simulators.fake_adb import run_fake_adb
    from simulators.fake_adb.server import ConsolePortError

    try:
        run_fake_adb(
            port=args.port,
            devices=args.devices,
            seed=args.seed,
            host=args.host,
            console_base_port=args.console_port or None,
            readable=args.readable,
        )
    except ConsolePortError as exc:
        raise busy_port_error(exc, "--console-port", exc.port) or exc from None
    except OSError as exc:
        raise busy_port_error(exc, "--port", args.port) or exc from None
    return 0


def build_parser(flow_options: bool | str = True) -> argparse.ArgumentParser:
    """The `distrl` parser; `flow_options`: add the options of every command's flow, of none, or of one."""
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
    sql.add_argument("--max-rows", type=row_count, default=50, help="rows shown by --format table")
    sql.set_defaults(func=_cmd_sql)

    demo = sub.add_parser("demo", help="embedded run: warm start, async A-RIDE, held-out evaluation, plot")
    demo.set_defaults(func=_cmd_demo)

    home_help = "folder of the embedded store, MLflow database and Prefect home (env variables win)"
    local = sub.add_parser("train-local", help="collectors and learner in this process, resuming from latest")
    local.add_argument("--home", default=HOME, help=home_help)
    local.set_defaults(func=_cmd_train_local)

    evaluate = sub.add_parser("evaluate", help="evaluate a policy version on the held-out split")
    evaluate.add_argument("--home", default=HOME, help=home_help)
    evaluate.set_defaults(func=_cmd_evaluate)

    retrain = sub.add_parser(
        "retrain", help="fine-tune champion on recent shards, evaluate, promote only if better"
    )
    retrain.add_argument("--home", default=HOME, help=home_help)
    retrain.set_defaults(func=_cmd_retrain)

    status = sub.add_parser("status", help="policy versions, pools, replay size, last evaluation")
    status.add_argument("--home", default=HOME, help=home_help)
    status.set_defaults(func=_cmd_status)

    up = sub.add_parser(
        "up",
        help="local equivalent of the distributed setup: Prefect, MLflow and S3 (moto) servers, work pools, "
        "workers, deployments",
    )
    up.add_argument("--detach", action="store_true", help="leave it running; stop with `distrl up --down`")
    up.add_argument("--down", action="store_true", help="stop a detached stack (or a killed one's leftovers)")
    up.set_defaults(func=_cmd_up)

    add_pretrained_command(sub)

    add_run_parser(sub)

    fake = sub.add_parser("fake-adb", help="serve SimDroid devices over the real ADB wire protocol")
    fake.add_argument("--port", type=port, default=5037)
    fake.add_argument("--devices", type=device_count, default=1)
    fake.add_argument("--seed", type=seed, default=0)
    fake.add_argument("--host", default="127.0.0.1")
    fake.add_argument(
        "--console-port",
        type=port,
        default=5554,
        help="first emulator console port; device i is emulator-<port+2i> with its console there, "
        "so `adb emu` finds it (0: free ports, which `adb emu` cannot find)",
    )
    fake.add_argument(
        "--readable",
        action="store_true",
        help="540x1200 phones drawn in DejaVu Sans, whose screenshots an OCR reads (--observation screen)",
    )
    fake.set_defaults(func=_cmd_fake_adb)
    add_setup_commands(sub)

    for name, (add_options, _) in FLOW_OPTIONS.items():
        if flow_options is True or flow_options == name:
            add_options(sub.choices[name])
    return parser


def _parse(argv: list[str]) -> argparse.Namespace:
    """Parse in two steps where the command's options come from its flow: the command's own options
    first (`--home`), then, under the environment they set, the flow's module and its options."""
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    if command not in FLOW_OPTIONS:
        return build_parser(flow_options=False).parse_args(argv)
    # --help waits for the second step, which knows every option.
    own, _ = build_parser(flow_options=False).parse_known_args([a for a in argv if a not in ("-h", "--help")])
    with environment_kept():
        FLOW_OPTIONS[command][1](own)
        parser = build_parser(flow_options=command)
    return parser.parse_args(argv)


def _verbosity(argv: list[str]) -> int:
    """The count of -v before the command (what `--verbose` will parse to)."""
    count = 0
    for arg in argv:
        if not arg.startswith("-"):
            break
        count += 1 if arg == "--verbose" else len(arg) - 1 if set(arg[1:]) == {"v"} else 0
    return count


def _level(verbose: int) -> int:
    return logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING


def main(argv: list[str] | None = None) -> int:
    from storage.store import logging_restored

    with logging_restored():  # a caller that runs the CLI in its own process keeps its logging
        return _main(sys.argv[1:] if argv is None else argv)


def _main(argv: list[str]) -> int:
    from ops.quiet import quiet_third_party
    from storage.secrets import redact
    from storage.store import configure_logging

    quiet_third_party()  # before any command imports transformers or MLflow
    # Before parsing, which imports the command's flow module and with it Prefect: the root logger
    # gets this process's handler, not one bound to the stderr of the moment (see configure_logging).
    # Secrets are scrubbed from every record (botocore logs the access key id at DEBUG).
    configure_logging(_level(_verbosity(argv)))
    args = _parse(argv)
    configure_logging(_level(args.verbose))  # Prefect's import put its own handler on the root
    for warning in unknown_env_warnings(os.environ):
        print(f"warning: {warning}", file=sys.stderr)
    from tasks.stop import install_stop_signals, signalled

    install_stop_signals()
    try:
        code = int(args.func(args))
        return 128 + stop_signal if (stop_signal := signalled()) else code
    except KeyboardInterrupt:
        print(f"stopped by {signal.Signals(signalled() or signal.SIGINT).name}", file=sys.stderr)
        return 128 + (signalled() or signal.SIGINT)
    except Exception as exc:
        if (stop_signal := signalled()) is not None:  # the failure of a run stopped by a signal
            print(f"stopped by {signal.Signals(stop_signal).name} ({type(exc).__name__})", file=sys.stderr)
            return 128 + stop_signal
        message = user_error_message(exc)
        if args.verbose:  # the traceback, with any secret it quotes (a URI's password) masked
            sys.stderr.write(redact("".join(traceback.format_exception(exc))))
        if message is None:  # not a recognised user error (a server down, a bug): still one line
            print(f"error: {redact(failure_line(exc))}", file=sys.stderr)
            return 1
        print(f"error: {redact(message)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
