"""Where the trajectory store lives: a local folder or an S3 prefix, behind one fsspec filesystem.

Credentials are never configured here: s3fs uses the standard AWS chain (environment variables,
shared config files, instance roles), and `AWS_ENDPOINT_URL` points it at MinIO, moto or another
S3-compatible server. Only non-secret settings are read from `DISTRL_*` variables.
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import TextIO

import fsspec
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from storage.secrets import redact

TRAJECTORIES_DIR = "trajectories"
QUARANTINE_DIR = "quarantine"
REPLAY_STATE_DIR = "replay"

log = logging.getLogger(__name__)


class StoreSettings(BaseSettings):
    """Settings of the trajectory store, read from `DISTRL_*` environment variables."""

    model_config = SettingsConfigDict(env_prefix="DISTRL_", extra="ignore")

    store_uri: str = Field(
        default=".distrl/store",
        description="Root of the store: a local path, file:// URI, or s3://bucket/prefix.",
    )
    s3_endpoint_url: str | None = Field(
        default=None,
        description="S3 endpoint override; defaults to the standard AWS_ENDPOINT_URL(_S3) variables.",
    )


@dataclass(frozen=True)
class Store:
    """A resolved store root. `root` is a path inside `fs` (no protocol prefix for S3)."""

    uri: str
    protocol: str  # "file" or "s3"
    root: str
    endpoint_url: str | None = None

    @cached_property
    def fs(self) -> fsspec.AbstractFileSystem:
        if self.protocol == "file":
            return fsspec.filesystem("file", auto_mkdir=True)
        client_kwargs = {"endpoint_url": self.endpoint_url} if self.endpoint_url else {}
        # skip_instance_cache: a cached instance would outlive a test's moto server or a changed endpoint.
        return fsspec.filesystem("s3", client_kwargs=client_kwargs, skip_instance_cache=True)

    @cached_property
    def ranged_fs(self) -> fsspec.AbstractFileSystem:
        """`fs` for readers that fetch some columns of a shard (a replay without screenshots): an S3
        read fetches the byte range asked for, where s3fs's default read-ahead fetches up to 50 MB,
        a whole shard and its screenshots, on the first read."""
        if self.protocol == "file":
            return self.fs
        client_kwargs = {"endpoint_url": self.endpoint_url} if self.endpoint_url else {}
        return fsspec.filesystem(
            "s3", client_kwargs=client_kwargs, skip_instance_cache=True, default_cache_type="none"
        )

    @property
    def is_local(self) -> bool:
        return self.protocol == "file"

    def path(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    def url(self, path: str) -> str:
        """A path inside the store as a URL that DuckDB and people can read."""
        return path if self.is_local else f"s3://{path}"

    @property
    def trajectories(self) -> str:
        return self.path(TRAJECTORIES_DIR)

    @property
    def quarantine(self) -> str:
        return self.path(QUARANTINE_DIR)


def open_store(uri: str | None = None, *, endpoint_url: str | None = None) -> Store:
    """Resolve a store URI (or `DISTRL_STORE_URI`) to a `Store`; errors say what form is expected."""
    settings = StoreSettings()
    uri = uri or settings.store_uri
    endpoint_url = (
        endpoint_url
        or settings.s3_endpoint_url
        or os.environ.get("AWS_ENDPOINT_URL_S3")
        or os.environ.get("AWS_ENDPOINT_URL")
    )
    if uri.startswith("s3://"):
        root = uri.removeprefix("s3://").strip("/")
        bucket = root.split("/", 1)[0]
        if len(bucket) < 3:
            raise ValueError(f"store URI {uri!r}: S3 bucket names have at least 3 characters")
        return Store(uri=uri, protocol="s3", root=root, endpoint_url=endpoint_url)
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", uri) and not uri.startswith("file://"):
        raise ValueError(
            f"store URI {uri!r}: unsupported scheme; use a local path, file:///abs/path or s3://bucket/prefix"
        )
    local = Path(uri.removeprefix("file://")).expanduser().resolve()
    return Store(uri=uri, protocol="file", root=local.as_posix())


@cache
def store_errors() -> tuple[type[Exception], ...]:
    """What a store's I/O raises when the store failed (unreachable, timed out, refused, full) rather
    than the caller: s3fs maps S3's answers to `OSError`, but lets botocore's own connection errors
    through unmapped, so a refused or unreachable endpoint raises `EndpointConnectionError`."""
    try:
        import botocore.exceptions  # type: ignore[import-untyped]
    except ImportError:  # a local-only install has no S3 client
        return (OSError,)
    return (OSError, botocore.exceptions.BotoCoreError)


def check_store_root(store: Store) -> None:
    """Raise `ValueError` (one line) unless `store` can be read: a local folder that exists, or a
    bucket that exists at a reachable endpoint. An empty store is fine; a typo is not an empty store."""
    if store.is_local:
        root = Path(store.root)
        if root.is_file():
            raise ValueError(f"{store.uri!r} is a file, not a store folder")
        if not root.is_dir():
            raise ValueError(f"{store.uri!r}: no such folder (nothing has been collected there)")
        return
    import botocore.exceptions  # type: ignore[import-untyped]

    bucket = store.root.split("/", 1)[0]
    where = store.endpoint_url or "AWS"
    try:
        store.fs.ls(bucket, refresh=True)  # `exists(bucket)` answers False for an unreachable endpoint
    except FileNotFoundError:
        raise ValueError(f"{store.uri!r}: no bucket {bucket!r} at {where}") from None
    except (*store_errors(), botocore.exceptions.ClientError) as exc:
        detail = redact(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        raise ValueError(
            f"{store.uri!r}: cannot read S3 at {where} ({detail}); check DISTRL_S3_ENDPOINT_URL "
            "(or AWS_ENDPOINT_URL), the network and the credentials"
        ) from None


def atomic_put(store: Store, path: str, payload: bytes) -> None:
    """Write a file that readers see either whole or not at all."""
    if store.is_local:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        # A dot-prefixed temp name (readers glob *.parquet and skip hidden files) that names its
        # writer, so that `sweep_stale_temps` can tell a killed writer's leftover from a live write.
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.{os.getpid()}@{_HOST}.tmp")
        try:
            with open(tmp, "wb") as fh:
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())  # the data is on disk before the name points at it
            tmp.replace(target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    else:
        store.fs.pipe_file(path, payload)  # one PUT: an S3 object is visible only when complete


_HOST = socket.gethostname().replace(".", "_").replace("@", "_") or "host"
_TEMP = re.compile(r"^\..+\.[0-9a-f]{8}(?:\.(?P<pid>\d+)@(?P<host>[^./]+))?\.tmp$")


def sweep_stale_temps(
    store: Store, *, min_age_s: float = 3600.0, foreign_age_s: float = 86_400.0
) -> list[str]:
    """Remove temp files that killed writers left in a local store; returns their paths.

    A temp is removed only when it is older than `min_age_s` and its writer (pid and host in its
    name) is no longer running on this host; a temp from another host, or an older unnamed one,
    only when older than `foreign_age_s`. A live write is never touched (and a reused pid only keeps
    a leftover longer). S3 stores have no temp files: an object appears whole with its one PUT.
    """
    if not store.is_local or not Path(store.root).exists():
        return []
    now = time.time()
    removed = []
    for tmp in Path(store.root).rglob(".*.tmp"):
        match = _TEMP.match(tmp.name)
        try:
            age = now - tmp.stat().st_mtime
        except FileNotFoundError:  # renamed or removed meanwhile
            continue
        if match is None:
            continue
        ours = match["host"] == _HOST and match["pid"] is not None
        if (ours and (age < min_age_s or _alive(int(match["pid"])))) or (not ours and age < foreign_age_s):
            continue
        tmp.unlink(missing_ok=True)
        removed.append(tmp.as_posix())
        log.info("removed stale temp file %s (%.0f s old)", tmp, age)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class RedactSecrets(logging.Filter):
    """A handler filter that scrubs secret values from every record (botocore logs keys at DEBUG)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes each record to `sys.stderr` as it is when the record comes, not when the handler was made.

    A handler that keeps the stream of its creation writes into a closed file once that stream is
    replaced and closed (pytest's capture, `contextlib.redirect_stderr`): every later record in the
    process then fails with "I/O operation on closed file".
    """

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _: TextIO) -> None:
        pass  # StreamHandler.__init__ and setStream assign it; the current stderr always wins


def configure_logging(level: int = logging.WARNING) -> None:
    """Root logging for the CLI and flows: one stderr handler, secrets redacted on every handler,
    chatty AWS loggers capped.

    Prefect's import puts its console handler on the root logger, bound to the stderr of that
    moment; the CLI's process owns its root logger, so that handler is replaced by one that follows
    the current stderr. Called again, it only changes the level.
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        if type(handler).__name__ == "PrefectConsoleHandler":
            root.removeHandler(handler)
    ours = next((h for h in root.handlers if isinstance(h, StderrHandler)), None)
    if ours is None:
        ours = StderrHandler()
        ours.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(ours)
    # The handler's level too: a library that sets its own logger to INFO (werkzeug) stays quiet without -v.
    ours.setLevel(level)
    root.setLevel(level)
    for handler in root.handlers:
        if not any(isinstance(f, RedactSecrets) for f in handler.filters):
            handler.addFilter(RedactSecrets())
    # Capped at INFO unless DEBUG is asked for; then the filter above is what keeps the keys out
    # of botocore's signing records.
    for noisy in _NOISY:
        logging.getLogger(noisy).setLevel(level if level <= logging.DEBUG else max(level, logging.INFO))


_NOISY = ("botocore", "aiobotocore", "s3fs", "urllib3", "fsspec")


@contextmanager
def logging_restored() -> Iterator[None]:
    """Undo, on exit, what `configure_logging` and Prefect's import did to the root logger.

    For a caller that runs the CLI inside its own process (tests, notebooks): without it the root
    kept a handler bound to a stream that was closed since, and the level of the last `-v`.
    """
    root = logging.getLogger()
    saved = root.level, list(root.handlers), {n: logging.getLogger(n).level for n in _NOISY}
    try:
        yield
    finally:
        root.setLevel(saved[0])
        for handler in list(root.handlers):
            if handler not in saved[1]:
                root.removeHandler(handler)
        for name, level in saved[2].items():
            logging.getLogger(name).setLevel(level)
