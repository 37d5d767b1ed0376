from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from storage.catalog import list_shards, read_shard
from storage.shards import ShardFlushError, ShardWriter, ShardWriterConfig
from storage.store import RedactSecrets, Store, open_store
from storage.synthetic import synthetic_episode


def _config(**kw) -> ShardWriterConfig:
    base = {
        "pool": "pool_a",
        "collector_id": "c0",
        "flush_episodes": 3,
        "flush_seconds": 0,
        "backoff_s": 0.01,
    }
    return ShardWriterConfig(**(base | kw))


def test_flush_on_episode_count_never_splits_episodes(any_store: Store) -> None:
    rng = np.random.default_rng(1)
    with ShardWriter(any_store, _config()) as writer:
        for _ in range(7):
            writer.add_episode(synthetic_episode(rng))
        assert len(writer.written) == 2 and writer.buffered_episodes == 1
    shards = list_shards(any_store)
    assert len(shards) == 3  # 3 + 3 on count, 1 on close
    for shard in shards:
        table = read_shard(any_store, shard.path)
        for episode in set(table.column("episode_id").to_pylist()):
            steps = [r["step"] for r in table.to_pylist() if r["episode_id"] == episode]
            assert steps == list(range(len(steps)))  # complete and in order within one shard
            assert steps and table.num_rows > 0


def test_shard_path_is_hive_partitioned(local_store: Store) -> None:
    with ShardWriter(local_store, _config(collector_id="col7")) as writer:
        writer.add_episode(synthetic_episode(np.random.default_rng(0)))
    (path,) = [s.path for s in list_shards(local_store)]
    relative = Path(path).relative_to(local_store.root).as_posix()
    assert relative.startswith("trajectories/pool=pool_a/date=")
    name = Path(path).name
    assert name.startswith("col7-000000-") and name.endswith(".parquet")


def test_timer_flushes_an_idle_buffer(local_store: Store) -> None:
    writer = ShardWriter(local_store, _config(flush_episodes=100, flush_seconds=0.2))
    writer.add_episode(synthetic_episode(np.random.default_rng(0)))
    deadline = time.monotonic() + 10
    while not list_shards(local_store) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(list_shards(local_store)) == 1
    writer.close()


def test_local_write_is_atomic_temp_files_are_hidden(local_store: Store, monkeypatch) -> None:
    seen_during_write: list[int] = []
    real_write = pq.write_table

    def spying_write(*args, **kwargs):
        seen_during_write.append(len(list_shards(local_store)))
        return real_write(*args, **kwargs)

    monkeypatch.setattr(pq, "write_table", spying_write)
    with ShardWriter(local_store, _config(flush_episodes=1)) as writer:
        writer.add_episode(synthetic_episode(np.random.default_rng(0)))
    assert seen_during_write == [0]
    leftovers = [p for p in Path(local_store.root).rglob("*") if p.is_file() and p.name.startswith(".")]
    assert leftovers == []


@pytest.mark.parametrize("store_kind", ["local", "s3"])
def test_four_concurrent_writers_lose_and_duplicate_nothing(request, store_kind: str) -> None:
    store: Store = request.getfixturevalue(f"{store_kind}_store")
    written: dict[int, list[str]] = {}

    def collector(index: int) -> None:
        rng = np.random.default_rng(index)
        ids = []
        config = _config(collector_id=f"c{index}", pool=f"pool_{index % 2}", flush_episodes=4)
        with ShardWriter(open_store(store.uri), config) as writer:
            for _ in range(25):
                episode = synthetic_episode(rng)
                ids.append(episode.column("episode_id")[0].as_py())
                writer.add_episode(episode)
        written[index] = ids

    threads = [threading.Thread(target=collector, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = [e for ids in written.values() for e in ids]
    read_back: list[str] = []
    for shard in list_shards(store):
        table = read_shard(store, shard.path)
        read_back += list(dict.fromkeys(table.column("episode_id").to_pylist()))
    assert sorted(read_back) == sorted(expected)
    assert len(set(read_back)) == 100


def test_failed_flush_keeps_buffer_and_names_the_fix(aws_env: str, aws_keys: tuple[str, str], caplog) -> None:
    # A bucket that does not exist: every PUT fails, like an unreachable or misconfigured store.
    store = open_store("s3://distrl-missing-bucket/x")
    writer = ShardWriter(store, _config(flush_episodes=100, max_attempts=2))
    rng = np.random.default_rng(0)
    for _ in range(3):
        writer.add_episode(synthetic_episode(rng))
    # botocore logs request headers (the access key) at DEBUG: the handler filter must scrub them.
    caplog.handler.addFilter(RedactSecrets())
    with caplog.at_level(logging.DEBUG), pytest.raises(ShardFlushError) as err:
        writer.flush()
    message = str(err.value)
    assert "3 episodes stay buffered" in message and "Check the store URI" in message
    assert writer.buffered_episodes == 3
    for text in (message, caplog.text):
        assert aws_keys[1] not in text and aws_keys[0] not in text
    # The store comes back (bucket created): the same buffer is written, nothing lost.
    import boto3

    boto3.client("s3", endpoint_url=aws_env, region_name="us-east-1").create_bucket(
        Bucket="distrl-missing-bucket"
    )
    path = writer.flush()
    assert path is not None and writer.buffered_episodes == 0
    assert read_shard(store, path).num_rows > 0
    writer.close()


def test_an_endpoint_that_does_not_answer_costs_no_episode(aws_env: str) -> None:
    # A refused or unreachable endpoint is not an S3 answer: s3fs lets botocore's connection error
    # through unmapped (not an OSError). A collector's `add_episode` during a pulled cable raised it,
    # and the flow run failed where it should have waited for the store.
    import socket

    import boto3
    from moto.server import ThreadedMotoServer

    with socket.socket() as probe:  # a port nobody listens on yet
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    store = open_store("s3://distrl-comes-back/x", endpoint_url=endpoint)
    writer = ShardWriter(store, _config(flush_episodes=1, max_attempts=2, retry_seconds=0))
    rng = np.random.default_rng(1)
    assert writer.add_episode(synthetic_episode(rng)) is None  # acknowledged, not raised
    assert writer.buffered_episodes == 1 and "EndpointConnectionError" in (writer.last_error or "")
    with pytest.raises(ShardFlushError, match="1 episodes stay buffered"):
        writer.flush()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
            Bucket="distrl-comes-back"
        )
        path = writer.add_episode(synthetic_episode(rng))  # the store is back: both episodes go out
        assert path is not None and writer.buffered_episodes == 0
        assert len(set(read_shard(store, path).column("episode_id").to_pylist())) == 2
        writer.close()
    finally:
        server.stop()


def test_secrets_never_reach_shards_or_metadata(s3_store: Store, aws_keys: tuple[str, str]) -> None:
    with ShardWriter(s3_store, _config(flush_episodes=1)) as writer:
        writer.add_episode(synthetic_episode(np.random.default_rng(0)))
    (shard,) = list_shards(s3_store)
    raw = s3_store.fs.cat_file(shard.path)
    assert aws_keys[1].encode() not in raw and aws_keys[0].encode() not in raw


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pool": "../etc"}, "pool"),
        ({"collector_id": "a-b"}, "collector_id='a-b'"),
        ({"flush_episodes": 0}, "flush_episodes"),
    ],
)
def test_bad_config_is_explained(kwargs, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _config(**kwargs)


def test_add_episode_rejects_two_episodes(local_store: Store) -> None:
    import pyarrow as pa

    rng = np.random.default_rng(0)
    two = pa.concat_tables([synthetic_episode(rng), synthetic_episode(rng)])
    with ShardWriter(local_store, _config()) as writer, pytest.raises(ValueError, match="one episode"):
        writer.add_episode(two)
