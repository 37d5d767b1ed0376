"""The `distrl run` command's options and entry (its work: `ops.run`, imported only when it runs)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ops.cli_errors import port, positive_int
from ops.cli_flows import HOME

EXAMPLE = (
    'distrl run "Open the Clock app" --sim   or   distrl run --task general-test-0003 --device emulator-5554'
)


def add_run_parser(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser(
        "run",
        help="run a policy version on a device for one instruction, step by step, with a storyboard",
        description=f"One episode, printed as it happens, stored in the pool 'run'. e.g. {EXAMPLE}",
    )
    run.add_argument("instruction", nargs="?", help="what the agent should do (or --task)")
    run.add_argument("--task", dest="task_id", help="a SimDroid task id instead of an instruction")
    run.add_argument("--policy", default="champion", help="registry alias (default: %(default)s)")
    run.add_argument("--version", type=positive_int, help="a version number instead of the alias")
    where = run.add_mutually_exclusive_group()
    where.add_argument("--device", dest="serial", help="serial of a device behind the adb server")
    where.add_argument("--sim", action="store_true", help="a SimDroid in this process")
    run.add_argument("--adb-host", default="127.0.0.1", help="adb server host (default: %(default)s)")
    run.add_argument("--adb-port", type=port, default=5037, help="adb server port (default: %(default)s)")
    run.add_argument("--fake-adb", action="store_true", help="the adb server is `distrl fake-adb`")
    run.add_argument("--max-steps", type=positive_int, help="step limit (default: the task's horizon)")
    run.add_argument(
        "--sample", action="store_true", help="sample actions as collectors do (default: greedy)"
    )
    run.add_argument("--seed", type=int, default=0, help="SimDroid's seed (default: %(default)s)")
    run.add_argument(
        "--observation",
        choices=("tree", "screen"),
        default="tree",
        help="what the policy reads: the UI dump's elements, or an OCR of the screenshot alone "
        "(screen: needs `make pretrained-deps`; default: %(default)s)",
    )
    run.add_argument("--out", help="folder of screenshots and storyboards (default: HOME/runs)")
    run.add_argument("--home", default=HOME, help="folder of the embedded store and MLflow database")
    run.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    from ops.embedded import configure_embedded

    home = configure_embedded(args.home, quiet=True)
    from ops.run import POOL, RunRequest, run_policy
    from storage.secrets import redact

    request = RunRequest(
        instruction=args.instruction,
        task_id=args.task_id,
        policy=str(args.version) if args.version is not None else args.policy,
        sim=args.sim,
        serial=args.serial,
        adb_host=args.adb_host,
        adb_port=args.adb_port,
        fake_adb=args.fake_adb,
        max_steps=args.max_steps,
        greedy=not args.sample,
        seed=args.seed,
        observation=args.observation,
        out=Path(args.out) if args.out else home / "runs",
    )
    outcome = run_policy(request, report=lambda line: print(line, flush=True))
    print(f"storyboard: {outcome.storyboard}")
    store = redact(os.environ["DISTRL_STORE_URI"])  # set by configure_embedded, or by the user
    query = f"SELECT * FROM episodes WHERE episode_id = '{outcome.episode_id}'"
    print(f"stored in pool '{POOL}': distrl sql --store {store} \"{query}\"")
    if outcome.error is not None:
        print(
            f"error: the device stopped answering at step {outcome.steps + 1}: {outcome.error}",
            file=sys.stderr,
        )
        return 1
    return 0
