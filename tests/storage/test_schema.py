from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage.schema import (
    COLUMN_NAMES,
    SCHEMA_VERSION,
    SCHEMA_VERSION_KEY,
    STEP_SCHEMA,
    SchemaError,
    check_schema_version,
    steps_to_table,
    validate_table,
)
from storage.synthetic import synthetic_episode


def _rows() -> list[dict]:
    return synthetic_episode(np.random.default_rng(0), n_steps=3).to_pylist()


def test_round_trip_keeps_version_metadata() -> None:
    table = steps_to_table(_rows())
    sink = io.BytesIO()
    pq.write_table(table, sink)
    read = pq.read_table(io.BytesIO(sink.getvalue()))
    assert check_schema_version(read.schema.metadata) == SCHEMA_VERSION
    assert read.column_names == list(COLUMN_NAMES)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda r: r.pop("reward"), "reward"),
        (lambda r: r.update(reward="high"), "reward"),
        (lambda r: r.update(policy_version=None), "policy_version"),
        (lambda r: r.update(episode_status="weird"), "episode_status"),
        (lambda r: r.update(env_kind="emulator"), "env_kind"),
        (lambda r: r.update(secret_column=1), "secret_column"),
    ],
)
def test_errors_name_the_offending_field(mutate, field: str) -> None:
    rows = _rows()
    mutate(rows[1])
    with pytest.raises(SchemaError, match=f"'{field}'"):
        steps_to_table(rows)


def test_wrong_type_in_table_is_named() -> None:
    table = steps_to_table(_rows())
    bad = table.set_column(table.schema.get_field_index("step"), "step", pa.array([0, 1, 2], pa.int64()))
    with pytest.raises(SchemaError, match="'step' has type int64, expected int32"):
        validate_table(bad)


def test_unknown_major_version_is_refused_and_minor_accepted() -> None:
    assert check_schema_version({SCHEMA_VERSION_KEY: b"1.7"}) == "1.7"
    with pytest.raises(SchemaError, match="major version 2"):
        check_schema_version({SCHEMA_VERSION_KEY: b"2.0"})
    with pytest.raises(SchemaError, match=r"no 'distrl\.schema_version'"):
        check_schema_version({})


def test_screenshot_is_the_only_nullable_field() -> None:
    nullable = [f.name for f in STEP_SCHEMA if f.nullable]
    assert nullable == ["screenshot_png"]
