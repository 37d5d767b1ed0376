"""Store fixtures: a local folder, and a real S3 API served by moto on a loopback port."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator

import boto3
import pytest
from moto.server import ThreadedMotoServer

from bench.s3_counter import S3Counter, counting_s3
from storage.store import Store, open_store

SECRET_KEY = "distrl-test-secret-9f8e7d6c5b4a"
ACCESS_KEY = "AKIADISTRLTEST0001"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, moto_endpoint: str) -> str:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    return moto_endpoint


@pytest.fixture
def aws_keys() -> tuple[str, str]:
    """(access key id, secret key) that `aws_env` exports; tests check they never leak."""
    return ACCESS_KEY, SECRET_KEY


@pytest.fixture
def s3_store(aws_env: str) -> Store:
    bucket = f"distrl-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=aws_env, region_name="us-east-1").create_bucket(Bucket=bucket)
    return open_store(f"s3://{bucket}/runs/test")


@pytest.fixture
def local_store(tmp_path) -> Store:
    return open_store(str(tmp_path / "store"))


@pytest.fixture(params=["local", "s3"])
def any_store(request: pytest.FixtureRequest) -> Store:
    return request.getfixturevalue(f"{request.param}_store")


@pytest.fixture
def counted_s3_store(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Store, S3Counter]]:
    """A store on its own moto server whose every request is counted (`bench.s3_counter`), for tests
    that assert how many bytes or keys a reader fetched."""
    with counting_s3() as (endpoint, counter):
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        # moto's state is per process, shared by its servers: a bucket of its own per test
        bucket = f"distrl-counted-{uuid.uuid4().hex[:10]}"
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
        yield open_store(f"s3://{bucket}/run", endpoint_url=endpoint), counter
