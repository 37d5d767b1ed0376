"""User errors of the `distrl` command line: one line naming the flag or variable and the fix.

`main` turns the exceptions recognised here into `error: ...` and exit code 2; any other failure (a
server that is down, a bug) is one `error: <type>: <message>` line and exit code 1. The traceback
is shown only with -v. Flag values are checked by argparse
types (a flow's parameters by their pydantic model, see `ops.cli_options`), settings read from
`DISTRL_*` variables by their own validators.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import os
from collections.abc import Callable, Mapping
from typing import NoReturn

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from tasks.bounds import MAX_SEED, MAX_THREADS


class UserError(Exception):
    """A mistake in the command line or the environment; the message says what to change."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the usage text is one `--help` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _number(kind: Callable[[str], float], test: Callable[[float], bool], need: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {need}, got {text!r}") from None
        if not test(value):
            raise argparse.ArgumentTypeError(f"must be {need}, got {text}")
        return value

    return parse


# Every number a flag takes has a ceiling: an unbounded one reached an OverflowError deep inside
# (`--max-rows 99999999999999999999999`) instead of a line naming the flag.
MAX_ROWS = 1_000_000_000
row_count = _number(int, lambda v: 0 <= v <= MAX_ROWS, f"an integer >= 0 and <= {MAX_ROWS}")
device_count = _number(int, lambda v: 1 <= v <= MAX_THREADS, f"an integer >= 1 and <= {MAX_THREADS}")
seed = _number(int, lambda v: 0 <= v <= MAX_SEED, f"an integer >= 0 and <= {MAX_SEED}")
port = _number(int, lambda v: 0 <= v <= 65535, "a TCP port number 0-65535 (0: any free port)")
MAX_COUNT = 2**31 - 1  # a version number, a step limit: what the store's int32 columns hold
positive_int = _number(int, lambda v: 1 <= v <= MAX_COUNT, f"an integer >= 1 and <= {MAX_COUNT}")


def failure_line(exc: BaseException, limit: int = 300) -> str:
    """Any failure as one line: its type and the start of its message, whitespace collapsed (a
    server's error can run to a page); the traceback is `-v`'s."""
    text = " ".join(str(exc).split())
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{type(exc).__name__}: {text} (run with -v for the traceback)"


_BOUNDS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}


def pydantic_problem(error: ErrorDetails) -> str:
    """One pydantic error in a few words: `must be > 0` for a bound, else pydantic's own."""
    ctx = error.get("ctx", {})
    bounds = [f"{sign} {ctx[key]}" for key, sign in _BOUNDS.items() if key in ctx]
    return f"must be {' and '.join(bounds)}" if bounds else str(error["msg"]).removeprefix("Value error, ")


def validation_message(exc: ValidationError, flags: Mapping[str, str] | None = None) -> str:
    """Every error of `exc` on one line, each led by the flag of its field (from `flags`) or its name."""
    parts = []
    for error in exc.errors():
        loc = [str(p) for p in error["loc"]]
        where = (flags or {}).get(loc[0], loc[0]) if loc else exc.title
        parts.append(f"{'.'.join([where, *loc[1:]])}: {pydantic_problem(error)}")
    return "; ".join(parts).replace("\n", " ")


def user_error_message(exc: BaseException) -> str | None:
    """The one-line message for a user error, or None when `exc` is not one."""
    if isinstance(exc, UserError):
        return str(exc)
    if isinstance(exc, ValidationError):
        return validation_message(exc, _variables_of(exc.title))
    return None


def _variables_of(title: str) -> dict[str, str]:
    """Field → `DISTRL_*` variable, when `title` names a settings class (its values come from there)."""
    from ops.config_table import SETTINGS

    for settings in SETTINGS:
        if settings.__name__ == title:
            prefix = settings.model_config["env_prefix"]
            return {name: f"{prefix}{name}".upper() for name in settings.model_fields}
    return {}


def busy_port_error(exc: OSError, flag: str, value: int) -> UserError | None:
    if exc.errno == errno.EADDRINUSE:
        return UserError(
            f"{flag} {value}: the port is in use; stop what listens there or choose another port"
        )
    if exc.errno in (errno.EACCES, errno.EADDRNOTAVAIL):
        return UserError(
            f"{flag} {value}: {exc.strerror}; choose a port above 1024 on an address of this host"
        )
    return None


def known_env() -> set[str]:
    """Every `DISTRL_*` variable the settings classes (and the few direct readers) understand."""
    from ops.config_table import variables

    return variables()


def unknown_env_warnings(environ: Mapping[str, str] | None = None) -> list[str]:
    """One warning per `DISTRL_*` variable that nothing reads (a typo is otherwise silently ignored)."""
    environ = os.environ if environ is None else environ
    known = known_env()
    warnings = []
    for name in sorted(n for n in environ if n.upper().startswith("DISTRL_") and n.upper() not in known):
        close = difflib.get_close_matches(name.upper(), known, n=1)
        hint = f"did you mean {close[0]}?" if close else "no setting has this name"
        warnings.append(f"environment variable {name} is not used ({hint})")
    return warnings
