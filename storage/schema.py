"""The per-step trajectory schema: the single source of truth for every Parquet shard.

One row per environment step. Episode-level facts (length, return, duration) are SQL views over
these rows (see `storage/sql/views.sql`), never a second copy. The schema version is stored in
the Parquet file metadata under `distrl.schema_version`; readers accept any minor version of a
major they know and refuse the rest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from distrl_core.envs.kinds import ENV_KINDS

SCHEMA_VERSION = "1.0"
SCHEMA_VERSION_KEY = b"distrl.schema_version"
SUPPORTED_MAJOR_VERSIONS = frozenset({1})
SHARD_HOST_KEY = b"distrl.host"
"""Parquet key-value metadata of a shard: the host name of the machine whose collector wrote it.
A label of the file, not a column: every step of a shard comes from one host, and shards written
before it existed simply have none (the `shards` SQL view shows NULL)."""

EPISODE_STATUSES = ("ok", "truncated", "env_error")
"""`ok`: ended by the task (success, status action or horizon); `truncated`: cut by the collector
(stop request); `env_error`: the environment failed mid-episode. Only `ok` episodes are trained on."""

_FIELDS: list[tuple[str, pa.DataType, bool, str]] = [
    # name, type, nullable, meaning
    ("run_id", pa.string(), False, "collector run that produced the step"),
    (
        "episode_id",
        pa.string(),
        False,
        "globally unique episode id (uuid5 hex of the run id and a seeded draw)",
    ),
    ("step", pa.int32(), False, "0-based step index within the episode"),
    ("pool", pa.string(), False, "agent pool of the collector"),
    ("collector_id", pa.string(), False, "collector within the pool"),
    ("device_id", pa.string(), False, "device serial or simulator id"),
    ("env_kind", pa.string(), False, f"kind of environment, one of {ENV_KINDS} (EnvKind)"),
    ("task_id", pa.string(), False, "task identifier"),
    ("task_family", pa.string(), False, "task family, e.g. 'general' or 'webshop'"),
    ("instruction", pa.string(), False, "natural-language instruction"),
    ("observation_text", pa.string(), False, "compact text rendering of the UI the policy saw"),
    ("screenshot_png", pa.binary(), True, "PNG screenshot the policy saw (null when not captured)"),
    ("raw_output", pa.string(), False, "raw text the model emitted"),
    ("action", pa.string(), False, "canonical text of the parsed action"),
    ("action_valid", pa.bool_(), False, "false when the output did not parse to a valid action"),
    ("reward", pa.float32(), False, "reward received after the step"),
    ("done", pa.bool_(), False, "true on the episode's last step"),
    ("episode_success", pa.bool_(), False, "evaluator verdict for the whole episode (same on every step)"),
    ("episode_status", pa.string(), False, "one of EPISODE_STATUSES"),
    ("behaviour_logprob", pa.float32(), False, "log mu(a|s) of the emitted action, summed over its tokens"),
    ("action_token_count", pa.int32(), False, "number of tokens (or candidates' tokens) in the action"),
    ("policy_name", pa.string(), False, "registered policy name"),
    ("policy_version", pa.int64(), False, "policy version that produced the step"),
    ("step_started_at", pa.timestamp("us", tz="UTC"), False, "when the policy received the observation"),
    ("step_latency_ms", pa.float32(), False, "wall time of act + environment step, milliseconds"),
]

FIELD_DOCS: dict[str, str] = {name: doc for name, _, _, doc in _FIELDS}
STEP_SCHEMA = pa.schema(
    [pa.field(name, dtype, nullable=nullable) for name, dtype, nullable, _ in _FIELDS],
    metadata={SCHEMA_VERSION_KEY: SCHEMA_VERSION.encode()},
)
COLUMN_NAMES: tuple[str, ...] = tuple(STEP_SCHEMA.names)


class SchemaError(ValueError):
    """Data does not match the trajectory schema; the message names the offending field."""


def shard_metadata(host: str) -> dict[bytes, bytes]:
    """The key-value metadata a shard is written with: the schema version and the writer's host."""
    return {SCHEMA_VERSION_KEY: SCHEMA_VERSION.encode(), SHARD_HOST_KEY: host.encode()}


def shard_host(metadata: Mapping[bytes, bytes] | None) -> str | None:
    """The host a shard was written on, from its metadata (None for shards that predate the label)."""
    raw = (metadata or {}).get(SHARD_HOST_KEY)
    return None if raw is None else raw.decode(errors="replace")


def parse_version(version: str) -> tuple[int, int]:
    try:
        major, minor = (int(part) for part in version.split("."))
    except ValueError as exc:
        raise SchemaError(f"schema_version {version!r} is not 'MAJOR.MINOR'") from exc
    return major, minor


def check_schema_version(metadata: Mapping[bytes, bytes] | None, *, source: str = "shard") -> str:
    """Return the shard's schema version, or raise if it is missing or of an unknown major version."""
    raw = (metadata or {}).get(SCHEMA_VERSION_KEY)
    if raw is None:
        raise SchemaError(
            f"{source}: no '{SCHEMA_VERSION_KEY.decode()}' in the Parquet metadata; "
            "it was not written by distrl's ShardWriter (write shards with storage.shards.ShardWriter)"
        )
    version = raw.decode()
    major, _ = parse_version(version)
    if major not in SUPPORTED_MAJOR_VERSIONS:
        raise SchemaError(
            f"{source}: schema_version {version} has major version {major}; this reader supports "
            f"{sorted(SUPPORTED_MAJOR_VERSIONS)}. Upgrade distrl to read it."
        )
    return version


def validate_schema(schema: pa.Schema, *, source: str = "table") -> None:
    """Raise `SchemaError` naming the first field that is missing, extra, or of the wrong type."""
    for expected in STEP_SCHEMA:
        if expected.name not in schema.names:
            raise SchemaError(f"{source}: missing field '{expected.name}' ({FIELD_DOCS[expected.name]})")
        actual = schema.field(expected.name)
        if not actual.type.equals(expected.type):
            raise SchemaError(
                f"{source}: field '{expected.name}' has type {actual.type}, expected {expected.type}"
            )
    extra = [name for name in schema.names if name not in FIELD_DOCS]
    if extra:
        raise SchemaError(f"{source}: unknown field '{extra[0]}'; the step schema has no such column")


def validate_table(table: pa.Table, *, source: str = "table") -> None:
    """Check types, nulls and value domains; the error names the field and the first bad row."""
    validate_schema(table.schema, source=source)
    for field in STEP_SCHEMA:
        column = table.column(field.name)
        if not field.nullable and column.null_count:
            row = column.is_null().to_pylist().index(True)
            raise SchemaError(f"{source}: field '{field.name}' is null at row {row}; it is required")
    statuses = set(table.column("episode_status").unique().to_pylist())
    if not statuses <= set(EPISODE_STATUSES):
        bad = sorted(statuses - set(EPISODE_STATUSES))[0]
        raise SchemaError(f"{source}: field 'episode_status' has value {bad!r}; allowed: {EPISODE_STATUSES}")
    kinds = set(table.column("env_kind").unique().to_pylist())
    if not kinds <= set(ENV_KINDS):
        bad = sorted(kinds - set(ENV_KINDS))[0]
        raise SchemaError(
            f"{source}: field 'env_kind' has value {bad!r}; allowed: {ENV_KINDS} "
            "(a new kind is added to distrl_core.envs.kinds.EnvKind)"
        )


def steps_to_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Build a validated table from step dicts; a wrong or missing key raises `SchemaError`."""
    rows = list(rows)
    for i, row in enumerate(rows):
        missing = [name for name in COLUMN_NAMES if name not in row]
        if missing:
            raise SchemaError(f"step row {i}: missing field '{missing[0]}' ({FIELD_DOCS[missing[0]]})")
        extra = [key for key in row if key not in FIELD_DOCS]
        if extra:
            raise SchemaError(f"step row {i}: unknown field '{extra[0]}'")
    columns = {}
    for field in STEP_SCHEMA:
        try:
            columns[field.name] = pa.array([row[field.name] for row in rows], type=field.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
            raise SchemaError(f"field '{field.name}': {exc} (expected {field.type})") from exc
    table = pa.Table.from_pydict(columns, schema=STEP_SCHEMA)
    validate_table(table, source="steps")
    return table


def conform(table: pa.Table) -> pa.Table:
    """Reorder columns and attach the schema metadata (types must already match)."""
    validate_schema(table.schema)
    return table.select(list(COLUMN_NAMES)).cast(STEP_SCHEMA)
