"""`distrl sql` in a child process that is killed at the time limit.

DuckDB checks its interrupt between chunks of work only, so one long function call ignores it:
`SELECT lpad('x', 1200000000, 'y')` ran 455 s past a 20 s `DISTRL_SQL_TIMEOUT_S`. So the command's
process only starts a child (`python -m ops.sql_child`) and watches it: the child opens the store
and the read-only session exactly as before (every guard and limit of `storage.sql_views`,
`storage.sql_guard` and `storage.sql_limits` applies there, the interrupt included), says when the
query starts and when it has returned, and writes the formatted result to a private file. A query
that has not returned `KILL_GRACE_S` after the limit (time for the interrupt to end it cleanly) is
ended with SIGKILL, whatever DuckDB is doing, and the person reads the same one line as for an
interrupted query. The session is read-only, so a killed query changes nothing in the store; the
child's temporary files (spill folder, result) live in one private folder that the parent removes.

The parent never imports DuckDB or pyarrow (the child does): a trivial query costs about one
interpreter start more than it did in-process (measured in docs/performance.md, "Simulator and SQL").

Messages from child to parent are JSON lines on the child's standard output: `started` (the clock
starts), `fetched` (the query returned; formatting is not timed, as before), `exit` (code, the
lines for standard error, and whether a result file was written).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from storage.sql_limits import SqlSettings

# After the limit, how long the child's own interrupt may take to end the query cleanly (a query
# DuckDB can interrupt ends within milliseconds) before the child is killed.
KILL_GRACE_S = 1.0
STDOUT_FILE = "stdout"  # the formatted result, inside the private folder


@dataclass(frozen=True)
class SqlJob:
    """One `distrl sql` command, as the child needs it."""

    query: str
    store: str | None  # --store, or None for DISTRL_STORE_URI
    fmt: str
    out: str | None
    max_rows: int
    verbose: int = 0


@dataclass
class SqlOutcome:
    """What the command prints and returns."""

    code: int
    stderr: str = ""  # lines for standard error, already escaped and redacted
    killed: bool = False  # the child was killed at the time limit
    system_exit: str | None = None  # a usage error raised as SystemExit (`--format parquet` without --out)


def run_sql_child(
    job: SqlJob,
    settings: SqlSettings,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    python: str = sys.executable,
) -> SqlOutcome:
    """Run `job` in a child process: its warning or error lines go to `stderr`, then the result text
    to `stdout` (defaults: `sys.stderr`, `sys.stdout`), as the command printed them in one process."""
    with tempfile.TemporaryDirectory(prefix="distrl-sql-") as private:
        request = asdict(job) | {
            "settings": {
                "timeout_s": settings.timeout_s,
                "memory_limit": int(settings.memory_limit),
                "max_spill": int(settings.max_spill),
            },
            "parent": os.getpid(),
            "private": private,
        }
        # TMPDIR: the child's spill folder (`QueryLimits`) is made inside the private folder, so a
        # killed child leaves nothing behind.
        proc = subprocess.Popen(
            [python, "-m", "ops.sql_child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=os.environ | {"TMPDIR": private},
        )
        try:
            outcome = _watch(proc, json.dumps(request).encode(), settings)
        finally:
            if proc.poll() is None:  # an exception here, Ctrl-C: the query does not outlive us
                proc.kill()
            proc.wait()
        if outcome.stderr:
            print(outcome.stderr, file=stderr or sys.stderr)
        result = Path(private, STDOUT_FILE)
        if outcome.code == 0 and result.exists():
            with result.open(encoding="locale") as fh:  # as `write_result` wrote it
                shutil.copyfileobj(fh, stdout or sys.stdout)
    return outcome


def _watch(proc: subprocess.Popen[bytes], request: bytes, settings: SqlSettings) -> SqlOutcome:
    from storage.sql_limits import timeout_error

    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(request)
    proc.stdin.close()
    events = _Events(proc.stdout.fileno())
    event = events.next(None)  # opening the store and the session is not timed, as before
    if event.get("event") == "started":
        event = events.next(settings.timeout_s + KILL_GRACE_S)
        if event.get("event") == "timeout":
            proc.kill()
            return SqlOutcome(code=1, stderr=f"error: {timeout_error(settings)}", killed=True)
    if event.get("event") == "fetched":
        event = events.next(None)
    if event.get("event") != "exit":
        code = proc.wait()
        return SqlOutcome(
            code=1, stderr=f"error: the SQL child process ended unexpectedly (exit status {code})"
        )
    return SqlOutcome(code=int(event["code"]), stderr=event["stderr"], system_exit=event.get("system_exit"))


class _Events:
    """JSON lines read from a pipe, each within an optional time limit."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def next(self, timeout_s: float | None) -> dict[str, Any]:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while b"\n" not in self.buffer:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return {"event": "timeout"}
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                return {"event": "timeout"}
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return {"event": "eof"}
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        event: dict[str, Any] = json.loads(line)
        return event


# --- the child ---------------------------------------------------------------------------------


def _child_main() -> None:
    request = json.loads(sys.stdin.buffer.read())
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # a stray print from a library goes to stderr, never into the messages
    # Ctrl-C reaches the whole process group: the parent kills the child, which must not print a
    # traceback meanwhile; and a parent killed outright takes the query with it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from flows.child_process import die_with_parent

    die_with_parent(signal.SIGKILL)
    if os.getppid() != request["parent"]:
        return  # the parent was gone before the line above took effect
    from storage.store import configure_logging

    configure_logging(_level(request["verbose"]))

    def send(event: str, **fields: object) -> None:
        channel.write(json.dumps({"event": event, **fields}) + "\n")
        channel.flush()

    try:
        code, stderr = _run(request, send)
        send("exit", code=code, stderr=stderr)
    except SystemExit as exc:  # a usage error of write_result
        send("exit", code=1, stderr="", system_exit=str(exc.code))
    except Exception as exc:
        send("exit", **_failure(exc, request["verbose"]))


def _run(request: dict[str, Any], send: Any) -> tuple[int, str]:
    """`distrl sql` as it ran in one process: the store, the session, the query, the result."""
    from ops.cli_errors import UserError
    from storage.sql_limits import SqlSettings
    from storage.sql_output import escape_control, write_result
    from storage.sql_views import ReadOnlyError, open_sql
    from storage.store import check_store_root, open_store

    store_arg = request["store"]
    try:
        store = open_store(store_arg)
        check_store_root(store)  # a typo must not answer `0 rows` as if the store were empty
    except ValueError as exc:  # an unsupported scheme, a too-short bucket name, no such store
        raise UserError(f"{'--store' if store_arg else 'DISTRL_STORE_URI'}: {exc}") from None
    session = open_sql(store, warn=False, settings=SqlSettings(**request["settings"]))
    send("started")
    # Messages quote data and file names: their control characters are shown escaped, not obeyed.
    try:
        table = session.query(request["query"])
    except ReadOnlyError as exc:
        return 2, f"error: {escape_control(str(exc))}"
    except Exception as exc:  # DuckDB errors name the column/table; show them without a traceback
        return 1, "error: " + "\n".join(escape_control(line) for line in str(exc).splitlines())
    finally:
        session.close()
    send("fetched")
    warnings = [
        f"warning: left out unreadable shard {escape_control(f'{bad.path}: {bad.reason}')}"
        for bad in session.skipped
    ]
    out = request["out"]
    if out is None and request["fmt"] != "parquet":
        target: Path | None = Path(request["private"], STDOUT_FILE)
    else:
        target = None if out is None else Path(out)
    write_result(table, request["fmt"], target, max_rows=request["max_rows"])
    return 0, "\n".join(warnings)


def _failure(exc: Exception, verbose: int) -> dict[str, object]:
    """The line (and with -v the traceback) `distrl`'s own handler prints for an exception."""
    import traceback

    from ops.cli_errors import failure_line, user_error_message
    from storage.secrets import redact

    message = user_error_message(exc)
    trace = redact("".join(traceback.format_exception(exc))) if verbose else ""
    if message is None:
        return {"code": 1, "stderr": f"{trace}error: {redact(failure_line(exc))}"}
    return {"code": 2, "stderr": f"{trace}error: {redact(message)}"}


def _level(verbose: int) -> int:
    import logging

    return logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG


if __name__ == "__main__":
    _child_main()
