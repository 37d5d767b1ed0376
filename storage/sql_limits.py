"""Resource limits of `distrl sql` and `SqlSession.query`: time, memory, spill space, result size.

Without them a query such as `SELECT count(*) FROM range(1e13)` ran until interrupted, and a long
generated one drove the machine out of memory (DuckDB's own default is 80 % of RAM). Every
connection gets a memory limit, a private spill folder with a size cap, and each query a timer
that interrupts it; hitting any limit is one line naming the setting to raise.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import duckdb
from pydantic import ByteSize, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


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


class SqlLimitError(RuntimeError):
    """A query hit a resource limit; the message names the setting that raises it."""


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
        """Run the body with a timer that interrupts `con`; resource errors become `SqlLimitError`."""
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
            yield
        except duckdb.InterruptException:
            if state["fired"]:
                raise SqlLimitError(
                    f"query stopped after {self.settings.timeout_s:g} s (DISTRL_SQL_TIMEOUT_S); "
                    "narrow it (WHERE, LIMIT) or raise the limit"
                ) from None
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
