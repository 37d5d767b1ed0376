"""One learner per replay: a lease in the store, next to the replay's priority snapshot.

`replay/<learner_id>/lease.json` names its holder (host, pid, run id), a random token and the
wall-clock time it expires. The learner (`learn` and `retrain` alike) takes it before it reads the
snapshot and renews it every third of `ttl_s` while it runs; a second learner of the same replay
waits up to `wait_s` for it and then refuses with one line naming the holder and the expiry. A
lease not renewed by its expiry (the holder was killed) is taken over, with a warning.

Why the store and not the MLflow registry: what two learners corrupt is the replay's snapshot, and
the store is where it lives and what every learner of that replay shares; MLflow has no
compare-and-swap on tags. Every change is conditional, so two contenders never both win:
- S3 (and moto): a conditional PUT, `If-None-Match: *` to create, `If-Match: <ETag>` to renew or
  take over, and a conditional DELETE to release; the loser gets 412 and reads again.
- a local folder: read, check and write under an exclusive `flock` of `.lease.lock` beside it
  (POSIX locks: one host, or NFS with lock support).
Expiry is judged by the reader's clock: hosts sharing an S3 store need synchronised clocks (NTP);
the default `ttl_s` leaves a minute of slack.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from storage.store import REPLAY_STATE_DIR, Store, atomic_put

log = logging.getLogger(__name__)
LEASE_FILE = "lease.json"


class LeaseSettings(BaseSettings):
    """The learner's lease on its replay, read from `DISTRL_LEASE_*` variables."""

    model_config = SettingsConfigDict(env_prefix="DISTRL_LEASE_", extra="ignore")

    ttl_s: float = Field(
        default=60.0,
        gt=0,
        le=86_400,
        description="Seconds a learner's lease on its replay lasts unless renewed (every third of this); "
        "a learner killed with -9 keeps its replay from others this long.",
    )
    wait_s: float = Field(
        default=90.0,
        ge=0,
        le=86_400,
        description="Seconds a second learner of the same replay waits for the lease before refusing "
        "(the default outlasts a killed holder's lease; 0: refuse at once).",
    )


@dataclass(frozen=True)
class Holder:
    """Who holds a lease: enough to find the process, and the run a person would look up."""

    host: str
    pid: int
    run_id: str

    @classmethod
    def this_process(cls, run_id: str) -> Holder:
        return cls(socket.gethostname(), os.getpid(), run_id)

    def __str__(self) -> str:
        return f"run {self.run_id} (pid {self.pid} on {self.host})"


class LeaseHeld(RuntimeError):
    """Another live learner holds the replay's lease (one line: holder and expiry)."""


class LeaseLost(RuntimeError):
    """This learner's lease was taken over or could not be renewed before it expired."""


class _Conflict(Exception):
    """A conditional write lost to another writer: read again."""


@dataclass(frozen=True)
class _Record:
    holder: Holder
    token: str
    expires_at: float

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, payload: bytes) -> _Record | None:
        """None for a file that is not a lease (damaged, half-written by hand): it is taken over."""
        try:
            raw = json.loads(payload)
            holder = Holder(
                str(raw["holder"]["host"]), int(raw["holder"]["pid"]), str(raw["holder"]["run_id"])
            )
            expires = float(raw["expires_at"])
            return cls(holder, str(raw["token"]), expires) if math.isfinite(expires) else None
        except (ValueError, KeyError, TypeError):
            return None


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class ReplayLease:
    """The lease of one replay (`learner_id`) in `store`. `acquire()` before touching the replay,
    `check()` before publishing, `release()` at the end (or use it as a context manager)."""

    def __init__(
        self, store: Store, learner_id: str, holder: Holder, settings: LeaseSettings | None = None
    ) -> None:
        self.store = store
        self.learner_id = learner_id
        self.holder = holder
        self.settings = settings or LeaseSettings()
        self.path = store.path(REPLAY_STATE_DIR, learner_id, LEASE_FILE)
        self.token = uuid.uuid4().hex
        self.expires_at = 0.0  # of our last successful write; 0: not held
        self.lost: str | None = None  # why it was lost, once the renewer found out
        self._tag: object = None  # ETag (S3) or the bytes we wrote (local)
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    # ----- the protocol ---------------------------------------------------------------------------
    def acquire(self) -> ReplayLease:
        """Take the lease, waiting up to `wait_s` while a live holder renews it; then start renewing."""
        deadline = time.monotonic() + self.settings.wait_s
        announced = False
        while True:
            current, tag = self._read()
            now = time.time()
            mine = self._record(now)
            try:
                if tag is None:
                    self._tag = self._create(mine)
                elif current is None or current.expires_at <= now:
                    self._tag = self._replace(mine, tag)
                    log.warning(
                        "took over the lease of replay %r from %s: it expired at %s without renewal",
                        self.learner_id, current.holder if current else "an unreadable lease file",
                        _when(current.expires_at) if current else "?",
                    )  # fmt: skip
                else:
                    if time.monotonic() >= deadline:
                        raise LeaseHeld(self._held_message(current))
                    if not announced:
                        announced = True
                        log.warning(
                            "%s; waiting up to %.0f s", self._held_message(current), self.settings.wait_s
                        )
                    time.sleep(min(1.0, self.settings.ttl_s / 10, max(0.05, deadline - time.monotonic())))
                    continue
            except _Conflict:
                continue  # another contender wrote first: read again
            self.expires_at, self.lost = mine.expires_at, None
            self._start_renewing()
            return self

    def renew(self) -> None:
        """Push the expiry `ttl_s` ahead; `LeaseLost` if someone else holds it now."""
        for _ in range(3):
            current, tag = self._read()
            if current is None or current.token != self.token:
                who = current.holder if current else "nobody (the lease file is gone)"
                raise LeaseLost(f"the lease of replay {self.learner_id!r} is now held by {who}")
            mine = self._record(time.time())
            try:
                self._tag = self._replace(mine, tag)
            except _Conflict:
                continue
            self.expires_at = mine.expires_at
            return
        raise LeaseLost(f"the lease of replay {self.learner_id!r} kept changing under its holder")

    def check(self) -> None:
        """Raise `LeaseLost` unless this learner still holds the lease (no I/O: cheap per update)."""
        if self.lost is not None:
            raise LeaseLost(self.lost + "; this learner stops without publishing or saving priorities")
        if time.time() >= self.expires_at:
            raise LeaseLost(
                f"the lease of replay {self.learner_id!r} expired at {_when(self.expires_at)} without renewal "
                "(the store did not answer); this learner stops without publishing or saving priorities"
            )

    def release(self) -> None:
        """Stop renewing and delete the lease if it is still ours (a lost lease is left to its holder)."""
        self._stop.set()
        if self._renewer is not None and self._renewer is not threading.current_thread():
            self._renewer.join(timeout=10)
        if self.expires_at == 0.0 or self.lost is not None:
            return
        with contextlib.suppress(_Conflict, OSError):
            current, tag = self._read()
            if current is not None and current.token == self.token:
                self._delete(tag)
        self.expires_at = 0.0

    def __enter__(self) -> ReplayLease:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    # ----- helpers --------------------------------------------------------------------------------
    def _record(self, now: float) -> _Record:
        return _Record(self.holder, self.token, now + self.settings.ttl_s)

    def _held_message(self, current: _Record) -> str:
        return (
            f"replay {self.learner_id!r} is held by {current.holder} until {_when(current.expires_at)} "
            f"({self.store.url(self.path)}): one learner per replay; wait for it to finish, stop it, or give "
            "this learner another DISTRL_REPLAY_LEARNER_ID"
        )

    def _start_renewing(self) -> None:
        self._stop.clear()
        self._renewer = threading.Thread(target=self._renew_loop, name="replay-lease", daemon=True)
        self._renewer.start()

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.settings.ttl_s / 3):
            try:
                self.renew()
            except LeaseLost as exc:
                self.lost = str(exc)
                log.error("%s; this learner stops", exc)
                return
            except Exception as exc:  # the store is down: try again; `check` fails once it expires
                log.warning("could not renew the lease of replay %r (%s); retrying", self.learner_id, exc)

    # ----- storage: conditional operations, S3 or a local folder ----------------------------------
    def _read(self) -> tuple[_Record | None, object]:
        """(record, tag); tag None when there is no lease file at all."""
        if self.store.is_local:
            with self._locked():
                try:
                    payload = Path(self.path).read_bytes()
                except FileNotFoundError:
                    return None, None
            return _Record.decode(payload), payload
        try:
            # The ETag first: content read later is as new or newer, so a write conditioned on
            # this ETag can only fail spuriously, never succeed on content we did not see.
            etag = self.store.fs.info(self.path, refresh=True)["ETag"]
            payload = self.store.fs.cat_file(self.path)
        except FileNotFoundError:
            return None, None
        return _Record.decode(payload), etag

    def _create(self, record: _Record) -> object:
        payload = record.encode()
        if self.store.is_local:
            with self._locked():
                if Path(self.path).exists():
                    raise _Conflict
                atomic_put(self.store, self.path, payload)
            return payload
        return self._s3("put_object", Body=payload, IfNoneMatch="*")["ETag"]

    def _replace(self, record: _Record, tag: object) -> object:
        payload = record.encode()
        if self.store.is_local:
            with self._locked():
                try:
                    if Path(self.path).read_bytes() != tag:
                        raise _Conflict
                except FileNotFoundError:
                    raise _Conflict from None
                atomic_put(self.store, self.path, payload)
            return payload
        return self._s3("put_object", Body=payload, IfMatch=tag)["ETag"]

    def _delete(self, tag: object) -> None:
        if self.store.is_local:
            with self._locked():
                if Path(self.path).read_bytes() != tag:
                    raise _Conflict
                Path(self.path).unlink()
            return
        self._s3("delete_object", IfMatch=tag)

    def _s3(self, method: str, **kwargs: object) -> dict:
        bucket, key = self.path.split("/", 1)
        try:
            return self.store.fs.call_s3(method, Bucket=bucket, Key=key, **kwargs)
        except FileExistsError:  # s3fs's name for a failed If-None-Match
            raise _Conflict from None
        except OSError as exc:
            code = getattr(exc.__cause__, "response", {}).get("Error", {}).get("Code")
            if code in ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey"):
                raise _Conflict from None
            raise

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        lock = Path(self.path).with_name(".lease.lock")
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing drops the lock
