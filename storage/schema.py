"""The per-step trajectory schema: the single source of truth for every Parquet shard.

One row per environment step. Episode-level facts (length, return, duration) are SQL views over
these rows (see `storage/sql/views.sql`), never a second copy. The schema version is stored in
the Parquet file metadata under `distrl.schema_version`; readers accept any minor version of a
major they know and refuse the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from distrl_core.envs.kinds import ENV_KINDS

SCHEMA_VERSION = "1.1"
SCHEMA_VERSION_KEY = b"distrl.schema_version"
SUPPORTED_MAJOR_VERSIONS = frozenset({1})
SHARD_HOST_KEY = b"distrl.host"
"""Parquet key-value metadata of a shard: the host name of the machine whose collector wrote it.
A label of the file, not a column: every step of a shard comes from one host, and shards written
before it existed simply have none (the `shards` SQL view shows NULL)."""

# ----- bounds checked at ingest (`validate_ranges`, `validate_sizes`) ------------------------------
# Values beyond these are not data but damage or an attack: a 3e38 reward overflowed the learner's
# priorities to inf, a -1e30 log-probability its importance ratios, a policy version of 2^62 would
# make every other trajectory "stale". A shard with one such value is quarantined as a whole.
MAX_ABS_REWARD = 1_000.0
"""|reward| of one step at most this (finite). Task rewards are success 1/0 plus penalties of about
-1 (`distrl_core.envs.protocol`); a thousand times that keeps returns and squared errors far from
float32's range at any horizon."""
MIN_LOGPROB = -100_000.0
"""`behaviour_logprob` at least this (finite): a summed log-probability of a few thousand tokens at
-30 each; below it exp() of any ratio is 0 or inf in float32 anyway."""
MAX_LOGPROB = 1e-3
"""`behaviour_logprob` at most this: a log-probability is <= 0, with slack for float rounding."""
MAX_ACTION_TOKENS = 1 << 20
"""`action_token_count` in [0, this]."""
MAX_STEP_LATENCY_MS = 86_400_000.0
"""`step_latency_ms` in [0, this] (a day), finite."""
MAX_POLICY_VERSION = (1 << 31) - 1
"""`policy_version` in [0, this] for any reader; the learner also refuses versions newer than its
registry's newest (`validate_ranges`' `version_bound`): a version that does not exist is damage."""
MAX_SHARD_ROWS = 1_000_000
"""Rows (steps) of one shard, read from its footer before any data: a collector flushes tens of
episodes (`ShardWriterConfig.flush_episodes`), thousands of rows."""
MAX_TEXT_BYTES = 1 << 20
"""Bytes of one text value (UTF-8): an observation, an instruction, a model output."""
MAX_SCREENSHOT_BYTES = 16 << 20
"""Bytes of one `screenshot_png`."""
MAX_ROW_BYTES = 24 << 20
"""Bytes of one row's text and binary values together, decoded."""
MAX_SHARD_BYTES = 1 << 30
"""Bytes of one shard's text and binary values decoded (and of its pages uncompressed, from the
footer): a 0.5 MB file of 100k rows that repeat one 20 KB string decodes to 2 GB, which is refused
before it is materialised (strings are measured through their Parquet dictionary)."""

EPISODE_STATUSES = ("ok", "truncated", "env_error")
"""`ok`: ended by the task (success, status action or horizon); `truncated`: cut by the collector
(stop request); `env_error`: the environment failed mid-episode. Only `ok` episodes are trained on."""

OBSERVATION_KINDS = ("tree", "screen")  # distrl_core.envs.screen.OBSERVATION_KINDS; storage loads no torch

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
    (
        "observation",
        pa.string(),
        False,
        f"what the elements were read from, one of {OBSERVATION_KINDS}: 'tree' the UI dump, 'screen' "
        "an OCR of the screenshot (schema 1.1; shards of 1.0 read as 'tree')",
    ),
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
ADDED_COLUMNS: dict[str, tuple[str, Any]] = {"observation": ("1.1", "tree")}
"""Columns added by a minor version: the version that added each, and the value its rows take in
a shard written before (`upgrade`), so every 1.x shard reads as the current schema."""
STEP_SCHEMA = pa.schema(
    [pa.field(name, dtype, nullable=nullable) for name, dtype, nullable, _ in _FIELDS],
    metadata={SCHEMA_VERSION_KEY: SCHEMA_VERSION.encode()},
)
COLUMN_NAMES: tuple[str, ...] = tuple(STEP_SCHEMA.names)
IMAGE_COLUMN = "screenshot_png"
"""The one column that is large when collectors store screenshots (kilobytes a step, the rest ~130
bytes): readers that do not use it leave it unread (`storage.catalog.read_shard(without_images=True)`)."""


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
        if expected.name not in schema.names and expected.name in ADDED_COLUMNS:
            continue  # a shard of an older minor version: `upgrade` fills it
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


def upgrade(table: pa.Table) -> pa.Table:
    """``table`` with every column a later minor version added (`ADDED_COLUMNS`) that it lacks, at
    the value old rows take."""
    for name, (_, value) in ADDED_COLUMNS.items():
        if name not in table.schema.names:
            dtype = STEP_SCHEMA.field(name).type
            table = table.append_column(
                pa.field(name, dtype, nullable=False), pa.array([value] * table.num_rows, dtype)
            )
    return table


def validate_table(table: pa.Table, *, source: str = "table") -> None:
    """Check types, nulls and value domains; the error names the field and the first bad row."""
    validate_schema(table.schema, source=source)
    table = upgrade(table)
    for field in STEP_SCHEMA:
        column = table.column(field.name)
        if not field.nullable and column.null_count:
            row = column.is_null().to_pylist().index(True)
            raise SchemaError(f"{source}: field '{field.name}' is null at row {row}; it is required")
    statuses = set(table.column("episode_status").unique().to_pylist())
    if not statuses <= set(EPISODE_STATUSES):
        bad = sorted(statuses - set(EPISODE_STATUSES))[0]
        raise SchemaError(f"{source}: field 'episode_status' has value {bad!r}; allowed: {EPISODE_STATUSES}")
    observations = set(table.column("observation").unique().to_pylist())
    if not observations <= set(OBSERVATION_KINDS):
        bad = sorted(observations - set(OBSERVATION_KINDS))[0]
        raise SchemaError(f"{source}: field 'observation' has value {bad!r}; allowed: {OBSERVATION_KINDS}")
    kinds = set(table.column("env_kind").unique().to_pylist())
    if not kinds <= set(ENV_KINDS):
        bad = sorted(kinds - set(ENV_KINDS))[0]
        raise SchemaError(
            f"{source}: field 'env_kind' has value {bad!r}; allowed: {ENV_KINDS} "
            "(a new kind is added to distrl_core.envs.kinds.EnvKind)"
        )


VARIABLE_WIDTH_COLUMNS: tuple[str, ...] = tuple(
    f.name for f in STEP_SCHEMA if pa.types.is_string(f.type) or pa.types.is_binary(f.type)
)
_FIXED_ROW_BYTES = sum(f.type.bit_width // 8 for f in STEP_SCHEMA if f.name not in VARIABLE_WIDTH_COLUMNS)


def _value_bytes(column: pa.ChunkedArray) -> np.ndarray:
    """Bytes of each value of a string/binary column, nulls 0, measured without decoding a
    dictionary-encoded column (a dictionary's values are measured once, then gathered)."""
    parts = []
    for chunk in column.chunks:
        if pa.types.is_dictionary(chunk.type):
            lengths = pc.binary_length(chunk.dictionary).fill_null(0).to_numpy(zero_copy_only=False)
            indices = chunk.indices.fill_null(0).to_numpy(zero_copy_only=False)
            parts.append(
                lengths[indices].astype(np.int64) if len(lengths) else np.zeros(len(chunk), np.int64)
            )
        else:
            parts.append(pc.binary_length(chunk).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64))
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def validate_sizes(table: pa.Table, *, source: str = "table") -> None:
    """Raise `SchemaError` for a text value, a screenshot, a row or a whole shard over its cap
    (`MAX_TEXT_BYTES`, `MAX_SCREENSHOT_BYTES`, `MAX_ROW_BYTES`, `MAX_SHARD_BYTES`). Works on the
    table as read with its strings still dictionary-encoded, so a bomb is measured, not decoded."""
    if table.num_rows > MAX_SHARD_ROWS:
        raise SchemaError(f"{source}: {table.num_rows} rows; at most {MAX_SHARD_ROWS} (MAX_SHARD_ROWS)")
    row_bytes = np.full(table.num_rows, _FIXED_ROW_BYTES, dtype=np.int64)
    for name in VARIABLE_WIDTH_COLUMNS:
        if name not in table.column_names:
            continue
        sizes = _value_bytes(table.column(name))
        cap, cap_name = (
            (MAX_SCREENSHOT_BYTES, "MAX_SCREENSHOT_BYTES")
            if name == "screenshot_png"
            else (MAX_TEXT_BYTES, "MAX_TEXT_BYTES")
        )
        if len(sizes) and sizes.max() > cap:
            row = int(np.argmax(sizes > cap))
            raise SchemaError(
                f"{source}: field '{name}' has {int(sizes[row])} bytes at row {row}; at most {cap} ({cap_name})"
            )
        row_bytes += sizes
    if len(row_bytes) and row_bytes.max() > MAX_ROW_BYTES:
        row = int(np.argmax(row_bytes > MAX_ROW_BYTES))
        raise SchemaError(
            f"{source}: row {row} has {int(row_bytes[row])} bytes; at most {MAX_ROW_BYTES} (MAX_ROW_BYTES)"
        )
    total = int(row_bytes.sum())
    if total > MAX_SHARD_BYTES:
        raise SchemaError(
            f"{source}: {total} bytes of rows decoded; at most {MAX_SHARD_BYTES} per shard (MAX_SHARD_BYTES)"
        )


def _first_bad(table: pa.Table, name: str, ok: pa.ChunkedArray | pa.Array, rule: str, source: str) -> None:
    bad = pc.invert(pc.fill_null(ok, False))
    if pc.any(bad).as_py():
        row = pc.index(bad, True).as_py()
        value = table.column(name)[row].as_py()
        raise SchemaError(f"{source}: field '{name}' is {value!r} at row {row}; {rule}")


def _between(column: pa.ChunkedArray, low: float, high: float) -> pa.ChunkedArray:
    inside = pc.and_(pc.greater_equal(column, low), pc.less_equal(column, high))
    if pa.types.is_floating(column.type):  # NaN compares false; inf is outside any finite bound
        inside = pc.and_(inside, pc.is_finite(column))
    return inside


def validate_ranges(
    table: pa.Table, *, source: str = "table", version_bound: Callable[[int], int | None] | None = None
) -> None:
    """Raise `SchemaError` naming the field, the first bad row and the rule, for a value outside its
    bound (`MAX_ABS_REWARD`, `MIN_LOGPROB`..`MAX_LOGPROB`, `MAX_ACTION_TOKENS`, `MAX_STEP_LATENCY_MS`,
    `MAX_POLICY_VERSION`) or an episode whose steps are not 0..n-1 once each, ending with `done` on
    its last step (and only there). `version_bound(v)`, given the shard's largest version, returns
    the newest version that exists (None: unknown, only `MAX_POLICY_VERSION` applies)."""
    checks = [
        (
            "reward",
            -MAX_ABS_REWARD,
            MAX_ABS_REWARD,
            f"rewards are finite with |reward| <= {MAX_ABS_REWARD:g} (MAX_ABS_REWARD)",
        ),
        (
            "behaviour_logprob",
            MIN_LOGPROB,
            MAX_LOGPROB,
            f"log-probabilities are finite, in [{MIN_LOGPROB:g}, {MAX_LOGPROB:g}] (MIN_LOGPROB, MAX_LOGPROB)",
        ),
        (
            "action_token_count",
            0,
            MAX_ACTION_TOKENS,
            f"token counts are in [0, {MAX_ACTION_TOKENS}] (MAX_ACTION_TOKENS)",
        ),
        (
            "step_latency_ms",
            0.0,
            MAX_STEP_LATENCY_MS,
            f"latencies are finite, in [0, {MAX_STEP_LATENCY_MS:g}] ms (MAX_STEP_LATENCY_MS)",
        ),
        (
            "policy_version",
            0,
            MAX_POLICY_VERSION,
            f"policy versions are in [0, {MAX_POLICY_VERSION}] (MAX_POLICY_VERSION)",
        ),
    ]
    for name, low, high, rule in checks:
        _first_bad(table, name, _between(table.column(name), low, high), rule, source)
    if table.num_rows and version_bound is not None:
        largest = int(pc.max(table.column("policy_version")).as_py())
        newest = version_bound(largest)
        if newest is not None and largest > newest:
            _first_bad(
                table,
                "policy_version",
                pc.less_equal(table.column("policy_version"), newest),
                f"the newest published version is {newest}: a version that does not exist",
                source,
            )
    _validate_episodes(table, source)


def _validate_episodes(table: pa.Table, source: str) -> None:
    """Steps 0..n-1 once each per episode, `done` on the last step only."""
    if not table.num_rows:
        return
    steps = table.select(["episode_id", "step", "done"])
    per_episode = steps.group_by("episode_id").aggregate(
        [("step", "min"), ("step", "max"), ("step", "count"), ("step", "count_distinct")]
    )
    done = (
        steps.filter(pc.field("done")).group_by("episode_id").aggregate([("step", "min"), ("step", "count")])
    )
    done = done.rename_columns({"step_min": "done_step", "step_count": "done_count"})
    joined = per_episode.join(done, "episode_id", join_type="left outer")
    last = pc.subtract(joined.column("step_count"), 1)
    rules = [
        (pc.equal(joined.column("step_min"), 0), "its steps do not start at 0"),
        (
            pc.equal(joined.column("step_count_distinct"), joined.column("step_count")),
            "a step index appears twice",
        ),
        (pc.equal(joined.column("step_max"), last), "its steps are not 0..n-1 (a gap)"),
        (
            pc.equal(pc.fill_null(joined.column("done_count"), 0), 1),
            "it has no `done` step, or more than one",
        ),
        (pc.equal(joined.column("done_step"), last), "`done` is not on its last step"),
    ]
    for ok, rule in rules:
        bad = pc.invert(pc.fill_null(ok, False))
        if pc.any(bad).as_py():
            episode = joined.column("episode_id")[pc.index(bad, True).as_py()].as_py()
            raise SchemaError(
                f"{source}: episode {episode!r}: {rule}; an episode's steps are 0..n-1 once each, "
                "ending with `done` on the last"
            )


def decode_dictionaries(table: pa.Table) -> pa.Table:
    """The table with dictionary-encoded columns (as `read_dictionary` reads them) decoded to the
    plain types of the schema; call only after `validate_sizes` has bounded what they decode to."""
    for i, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type):
            table = table.set_column(i, field.name, pc.cast(table.column(i), field.type.value_type))
    return table


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
    return upgrade(table).select(list(COLUMN_NAMES)).cast(STEP_SCHEMA)
