"""What a `distrl sql` query may do: run queries over the store's shards, nothing else.

Two independent layers, so that a gap in one is not a hole:

1. `check_read_only` decides each statement's type with DuckDB's own parser and tokenizer (never
   by looking at the text: comments, parentheses and option lists make prefixes lie). Only queries
   run; an EXPLAIN (with or without ANALYZE) only of a query.
2. `lock_down` configures the connection once the views exist: DuckDB may read files only under
   the store's `trajectories/` folder, may not install or load extensions, and no later statement
   can change any setting (so `/proc/self/environ`, other buckets, URLs, COPY, ATTACH and logging
   to files all fail inside DuckDB even if a statement got past layer 1).
"""

from __future__ import annotations

import duckdb

# Words that may sit between EXPLAIN and the statement it explains (DuckDB's grammar:
# EXPLAIN [ANALYZE] [VERBOSE] [(option, ...)] statement).
_EXPLAIN_WORDS = frozenset({"analyze", "analyse", "verbose"})
_QUERY = duckdb.StatementType.SELECT  # SELECT, FROM-first, WITH, VALUES, DESCRIBE, SHOW, SUMMARIZE
_HINT = (
    "`distrl sql` is read-only and runs queries only (SELECT, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN of a "
    "query) over the views steps, episodes, tasks and policies. Export results with --format/--out."
)


class ReadOnlyError(ValueError):
    """A statement given to `distrl sql` would change something or reach outside the store."""


def check_read_only(con: duckdb.DuckDBPyConnection, text: str) -> None:
    """Raise `ReadOnlyError` unless every statement in `text` is a query (or EXPLAIN of one)."""
    try:  # bytes that are not UTF-8 reach Python as lone surrogates, which DuckDB cannot take
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"the query is not UTF-8 text (a byte that is not UTF-8 at character {exc.start + 1}); "
            "write it in UTF-8, e.g. with LANG=C.UTF-8 and a UTF-8 terminal or file"
        ) from None
    try:
        statements = con.extract_statements(text)
    except duckdb.Error as exc:
        raise ValueError(f"SQL does not parse: {exc}") from None
    if not statements:
        raise ValueError("no SQL statement given")
    for parsed in statements:
        if parsed.type == _QUERY:
            continue
        if parsed.type == duckdb.StatementType.EXPLAIN:
            inner = _explained_types(con, parsed.query)
            if inner == {_QUERY}:
                continue
            what = " or ".join(sorted(t.name for t in inner)) or "an unrecognised"
            raise ReadOnlyError(f"refused EXPLAIN of {what} statement: {_HINT}")
        raise ReadOnlyError(f"refused a {parsed.type.name} statement: {_HINT}")


def _explained_types(con: duckdb.DuckDBPyConnection, text: str) -> set[duckdb.StatementType]:
    """Types of the statement an EXPLAIN wraps, by every reading DuckDB's grammar allows.

    The tokens after EXPLAIN may be ANALYZE/VERBOSE and one parenthesised option list, but a '('
    may also open a parenthesised query. Rather than guess, every position where the explained
    statement could start is parsed on its own, and every reading that parses counts: the caller
    accepts only when all of them are queries.
    """
    spans = _code_spans(text)
    words = [text[s:e].strip() for s, e in spans]
    if not words or words[0].lower() != "explain":
        return set()
    kinds: set[duckdb.StatementType] = set()
    for start in _statement_starts(spans, words):
        try:
            inner = con.extract_statements(text[start:])
        except duckdb.Error:
            continue
        if len(inner) == 1:
            kinds.add(inner[0].type)
    return kinds


def _code_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of the tokens of `text`, comments left out."""
    raw = duckdb.tokenize(text)
    ends = [start for start, _ in raw[1:]] + [len(text)]
    return [
        (start, end)
        for (start, kind), end in zip(raw, ends, strict=True)
        if kind != duckdb.token_type.comment
    ]


def _statement_starts(spans: list[tuple[int, int]], words: list[str]) -> set[int]:
    """Offsets where the statement after `words[0]` (EXPLAIN) may start, by the grammar's readings."""
    starts: set[int] = set()

    def walk(i: int, paren_used: bool) -> None:
        if i >= len(words):
            return
        starts.add(spans[i][0])
        if words[i].lower() in _EXPLAIN_WORDS:
            walk(i + 1, paren_used)
        if words[i].startswith("(") and not paren_used:
            depth = 0
            for j in range(i, len(words)):
                depth += words[j].count("(") - words[j].count(")")
                if depth <= 0:
                    walk(j + 1, True)
                    break

    walk(1, False)
    return starts


def lock_down(con: duckdb.DuckDBPyConnection, readable_dir: str) -> None:
    """Let `con` read files only under `readable_dir` (a folder path or URL) and freeze its settings.

    Call after the views are created. S3 stores keep working: the views read their shards through
    a registered pyarrow dataset (`storage.sql_sources`), DuckDB's own reads (naming a bad shard)
    through the registered fsspec filesystem (no extension), and their URLs lie under `readable_dir`.
    """
    con.execute("SET allowed_directories = ?", [[readable_dir.rstrip("/") + "/"]])
    con.execute("SET enable_external_access = false")
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET lock_configuration = true")


def explain_refusal(exc: duckdb.Error) -> ReadOnlyError | None:
    """A user-facing refusal for DuckDB's own sandbox errors (None for any other error)."""
    message = str(exc)
    if isinstance(exc, duckdb.PermissionException) or "configuration has been locked" in message:
        return ReadOnlyError(f"refused: {message.splitlines()[0]}. {_HINT} No other file, URL or setting.")
    return None
