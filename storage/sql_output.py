"""Writing query results as a table, CSV, JSON lines or Parquet.

The table is for a terminal: control characters in the data (an ESC sequence can retitle or clear
the terminal) are shown escaped, as `\x1b`, and floats to 4 significant digits. CSV, JSON and Parquet are the data, unchanged (JSON
escapes control characters by its own rules; CSV keeps them, quoted where needed).
"""

from __future__ import annotations

import json
import sys
import unicodedata
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq


def _jsonable(value: object) -> object:
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return value


def escape_control(text: str) -> str:
    """`text` safe to print on a terminal: control characters (C0, DEL, C1) and invisible format
    characters (bidi overrides, zero-width ones) shown as `\\x1b` or `\\u202e`."""
    return "".join(_escaped(c) if unicodedata.category(c) in ("Cc", "Cf") else c for c in text)


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def format_table(table: pa.Table, max_rows: int = 50) -> str:
    """A plain aligned text table; binary cells show their size, long text is cut, control
    characters are escaped, floats shown to 4 significant digits."""
    names = [escape_control(n) for n in table.column_names]
    rows = [[_cell(v) for v in row.values()] for row in table.slice(0, max_rows).to_pylist()]
    widths = [max([len(n)] + [len(r[i]) for r in rows]) for i, n in enumerate(names)]
    line = "  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    if table.num_rows > max_rows:
        out.append(f"... {table.num_rows - max_rows} more rows (use --max-rows or --format csv)")
    out.append(f"({table.num_rows} rows)")
    return "\n".join(out)


def _cell(value: object) -> str:
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    text = "NULL" if value is None else _float_text(value) if isinstance(value, float) else str(value)
    # Escaped after a first cut: a huge cell is not scanned whole for 60 characters.
    text = escape_control(text[:61].replace("\n", " "))
    return text if len(text) <= 60 else text[:57] + "..."


def _float_text(value: float) -> str:
    """A float as a person reads it: 4 significant digits (0.4487, 12.35), whole numbers from 10,000
    up (no exponent for a count or a rate per hour); CSV, JSON and Parquet keep every digit."""
    if 1e4 <= abs(value) < 1e15:
        return f"{value:.0f}"
    return f"{value:.4g}"


def write_result(table: pa.Table, fmt: str, out: Path | None, *, max_rows: int = 50) -> None:
    if fmt == "parquet":
        if out is None:
            raise SystemExit("error: --format parquet needs --out FILE")
        pq.write_table(table, out)
        return
    if fmt == "table":
        text = format_table(table, max_rows) + "\n"
    elif fmt == "json":
        text = "".join(
            json.dumps({k: _jsonable(v) for k, v in row.items()}, default=str) + "\n"
            for row in table.to_pylist()
        )
    elif fmt == "csv":
        binary = [i for i, f in enumerate(table.schema) if pa.types.is_binary(f.type)]
        for i in binary:  # CSV cannot hold raw bytes; report the size instead
            sizes = pa.array([None if v is None else len(v) for v in table.column(i).to_pylist()], pa.int64())
            table = table.set_column(i, table.schema.field(i).name + "_bytes", sizes)
        sink = pa.BufferOutputStream()
        pacsv.write_csv(table, sink)
        text = sink.getvalue().to_pybytes().decode()
    else:
        raise ValueError(f"unknown format {fmt!r}; use table, csv, json or parquet")
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text)
