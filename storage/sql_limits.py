"""Resource limits of `distrl sql` and `SqlSession.query`: time, memory, spill space, result size.

Without them a query such as `SELECT count(*) FROM range(1e13)` ran until interrupted, and a long
generated one drove the machine out of memory (DuckDB's own default is 80 % of RAM). Every
connection gets a memory limit, a private spill folder with a size cap, and each query a timer
that interrupts it; hitting any limit is one line naming the setting to raise.

DuckDB's memory limit governs its buffer manager, not every allocation: one value built by a query
(`SELECT length(repeat('x', 1500000000))`) took 3.1 GB under a 200 MB limit. So while a query runs
the process's data size (RLIMIT_DATA, on Linux) is also capped, at what it held before the query plus
twice the memory limit (DuckDB's share and the result's Arrow copy) plus `PROCESS_HEADROOM`; an
allocation past that fails inside DuckDB as out of memory, and the query ends with the same line.
The cap is the process's, for the query's duration: run queries from a process that does nothing
else meanwhile (as `distrl sql` and `distrl status` do).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import ByteSize, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:  # imported where a query runs: `distrl sql` reads its settings without DuckDB
    import duckdb


class SqlSettings(BaseSettings):
    """Limits of a SQL query over the store (`distrl sql`, `SqlSession.query`, `distrl status`)."""

    model_config = SettingsConfigDict(env_prefix="DISTRL_SQL_", extra="ignore")

    timeout_s: float = Field(
        300.0,
        gt=0,
        allow_inf_nan=False,
        description="A query still running after this many seconds is stopped.",
    )
    memory_limit: ByteSize = Field(
        ByteSize(2 * 1024**3),
        gt=0,
        description="DuckDB's memory for one query (e.g. 512MB, 4GiB), and the most a result may take; "
        "beyond it DuckDB spills to the spill folder where it can, else the query stops.",
    )
    max_spill: ByteSize = Field(
        ByteSize(10 * 1024**3),
        ge=0,
        description="Most disk a query may spill to, in a private temporary folder (mode 0700, removed "
        "when the session closes; never under the working folder, never readable by a query).",
    )


# Above the memory limit's share: thread stacks, allocator slack, the query's own small values.
PROCESS_HEADROOM = 256 * 1024**2


def _data_size() -> int | None:
    """The process's data segment (private writable memory) in bytes, or None off Linux."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


@contextmanager
def data_size_capped(extra: int) -> Iterator[None]:
    """Cap the process's data size at its current size plus `extra` bytes for the body (lowering only
    the soft limit, which the body's end raises back); where that cannot be read, no cap."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        yield
        return
    now = _data_size()
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    cap = None if now is None else now + extra
    if cap is not None and hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if cap is None or (soft != resource.RLIM_INFINITY and soft <= cap):
        yield  # already at or below the cap
        return
    resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


class SqlLimitError(RuntimeError):
    """A query hit a resource limit; the message names the setting that raises it."""


def timeout_error(settings: SqlSettings) -> SqlLimitError:
    """The one line of a query stopped at the time limit, interrupted or killed alike."""
    return SqlLimitError(
        f"query stopped after {settings.timeout_s:g} s (DISTRL_SQL_TIMEOUT_S); "
        "narrow it (WHERE, LIMIT) or raise the limit"
    )


def _size(value: int) -> str:
    return ByteSize(value).human_readable()


@dataclass
class QueryLimits:
    """The limits of one connection: set on it before it is locked, then applied to each query."""

    settings: SqlSettings
    spill_dir: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="distrl-sql-spill-"))

    def apply(self, con: duckdb.DuckDBPyConnection) -> None:
        """Set memory limit and spill folder (before `lock_down`, which freezes every setting).

        DuckDB adds its temp folder to the readable set even with external access off, and its
        default is `./.tmp` (readable by anyone who drops a file there): a private fresh folder
        holds nothing but this session's own spill files.
        """
        os.chmod(self.spill_dir, 0o700)
        con.execute("SET memory_limit = ?", [f"{int(self.settings.memory_limit)}B"])
        con.execute("SET temp_directory = ?", [self.spill_dir])
        con.execute("SET max_temp_directory_size = ?", [f"{int(self.settings.max_spill)}B"])

    @contextmanager
    def timed(self, con: duckdb.DuckDBPyConnection) -> Iterator[None]:
        """Run the body with a timer that interrupts `con`; resource errors become `SqlLimitError`.

        DuckDB checks the interrupt between chunks only: one long function call (`lpad` to 1.2e9
        characters) ran 455 s past a 20 s limit. `distrl sql` therefore runs its query in a child
        process that is killed at the limit (`ops.sql_child`); in-process callers get this timer."""
        import duckdb

        lock = threading.Lock()
        state = {"running": True, "fired": False}

        def stop() -> None:
            with lock:  # never interrupt a later query once this one is done
                if state["running"]:
                    state["fired"] = True
                    con.interrupt()

        timer = threading.Timer(self.settings.timeout_s, stop)
        timer.daemon = True
        timer.start()
        try:
            with data_size_capped(2 * int(self.settings.memory_limit) + PROCESS_HEADROOM):
                yield
        except MemoryError:  # Python's or Arrow's allocation past the cap (DuckDB's is the next one)
            raise self.memory_error("out of memory") from None
        except duckdb.InterruptException:
            if state["fired"]:
                raise timeout_error(self.settings) from None
            raise
        except duckdb.OutOfMemoryException as exc:
            raise self.memory_error(str(exc)) from None
        finally:
            with lock:
                state["running"] = False
            timer.cancel()

    def memory_error(self, detail: str) -> SqlLimitError:
        spill = "spill" in detail.lower() or "temp" in detail.lower()
        setting = "DISTRL_SQL_MAX_SPILL" if spill else "DISTRL_SQL_MEMORY_LIMIT"
        limit = self.settings.max_spill if spill else self.settings.memory_limit
        return SqlLimitError(
            f"query needs more than {_size(limit)} of {'spill space' if spill else 'memory'} ({setting}); "
            "aggregate more, select fewer columns or rows, or raise the limit"
        )

    def result_too_large(self, size: int) -> SqlLimitError:
        return SqlLimitError(
            f"query result exceeds {_size(self.settings.memory_limit)} after {_size(size)} "
            "(DISTRL_SQL_MEMORY_LIMIT); aggregate more, add a LIMIT, or raise the limit"
        )

    def close(self) -> None:
        shutil.rmtree(self.spill_dir, ignore_errors=True)
