"""Bad shards of every kind the probe found: unreadable, cut short, foreign, from the future, and
with a valid footer over corrupted data pages (which only a full read notices)."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from storage.schema import SCHEMA_VERSION_KEY
from storage.store import Store
from storage.synthetic import synthetic_episode


def _parquet(table: pa.Table, **kwargs) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **kwargs)
    return sink.getvalue()


def _damage_pages(payload: bytes, how: str) -> bytes:
    """Damage everything between the leading magic and the footer; the footer stays valid."""
    footer_len = int.from_bytes(payload[-8:-4], "little")
    data = bytearray(payload)
    for i in range(4, len(data) - 8 - footer_len):
        data[i] = 0 if how == "zero" else data[i] ^ 0x5A
    return bytes(data)


def bad_shards(store: Store, day: str = "2026-11-01") -> dict[str, bytes]:
    """Path -> payload of one bad shard per kind, under `trajectories/pool=pool_a/date=<day>/`."""
    episode = synthetic_episode(np.random.default_rng(9), n_steps=20)
    good = _parquet(episode, compression="zstd")
    base = store.path("trajectories", "pool=pool_a", f"date={day}")
    kinds = {
        "garbage": b"not a parquet file at all",
        "empty": b"",
        "half": good[: len(good) // 2],
        "foreign": _parquet(pa.table({"x": [1, 2, 3]})),
        "renamed": _parquet(pa.table({"x": [1]}).replace_schema_metadata({SCHEMA_VERSION_KEY: b"1.0"})),
        "future": _parquet(episode.replace_schema_metadata({SCHEMA_VERSION_KEY: b"2.0"})),
        "flipped_pages": _damage_pages(good, "flip"),
        "zeroed_pages": _damage_pages(good, "zero"),
        "flipped_plain_pages": _damage_pages(_parquet(episode, compression="none"), "flip"),
    }
    return {f"{base}/{kind}-000000-bad.parquet": payload for kind, payload in kinds.items()}
