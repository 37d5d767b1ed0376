"""When trying again may help: one rule for every retry in the tasks and flows.

`with_retries` wraps a plain call; `only_transient` is the `retry_condition_fn` of the Prefect tasks
that retry. Both retry a lost connection, a timeout, an HTTP 5xx (or 429) or a locked database, and
let anything else (a bug such as a TypeError, a refusal, a missing version) raise at once.
"""

from __future__ import annotations

import errno
import logging
import random
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")

# OSError numbers of a peer or a disk that may answer on the next try (s3fs maps S3's 503 SlowDown
# and ServiceUnavailable to EBUSY, its 500 InternalError to EREMOTEIO).
_TRANSIENT_ERRNOS = {
    errno.EAGAIN,
    errno.EBUSY,
    errno.ETIMEDOUT,
    errno.ECONNRESET,
    errno.ECONNREFUSED,
    errno.ECONNABORTED,
    errno.EPIPE,
    errno.ENETUNREACH,
    errno.EHOSTUNREACH,
    getattr(errno, "EREMOTEIO", errno.EIO),  # Linux only; s3fs falls back the same way
}
# MLflow's error codes for a server that cannot answer now (a locked SQLite store raises the first).
_TRANSIENT_MLFLOW_CODES = {"TEMPORARILY_UNAVAILABLE", "REQUEST_LIMIT_EXCEEDED", "DEADLINE_EXCEEDED"}


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and the exceptions it was raised from or while handling (MLflow wraps the request's)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)


def _http_status(exc: BaseException) -> int | None:
    """The HTTP status of the response behind `exc`, where it carries one."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):  # botocore's ClientError
        return response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    status = getattr(response, "status_code", None)  # requests' HTTPError
    if isinstance(status, int):
        return status
    if type(exc).__name__ == "RestException":  # an MLflow server's error answer, status from its code
        return int(exc.get_http_status_code())  # type: ignore[attr-defined]
    return None


def _is_transient_one(exc: BaseException) -> bool:
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    if isinstance(exc, OSError) and exc.errno in _TRANSIENT_ERRNOS:
        return True
    names = {cls.__name__ for cls in type(exc).__mro__}
    # requests', urllib3's and botocore's connection and timeout errors are not the built-in ones.
    if names & {"ConnectionError", "Timeout", "ConnectTimeoutError", "ReadTimeoutError"}:
        return True
    if "OperationalError" in names and "database is locked" in str(exc):  # sqlite3 or SQLAlchemy
        return True
    if getattr(exc, "error_code", None) in _TRANSIENT_MLFLOW_CODES:
        return True
    status = _http_status(exc)
    return status is not None and (status >= 500 or status == 429)


def is_transient(exc: BaseException) -> bool:
    """Whether trying again may succeed: a lost connection, a timeout, an HTTP 5xx (or 429), a locked
    database, anywhere in the chain of causes; a bug (TypeError, KeyError...) or a refusal is not."""
    return any(_is_transient_one(link) for link in _chain(exc))


def with_retries(fn: Callable[[], T], what: str, attempts: int = 6, delay_s: float = 0.2) -> T:
    """Run `fn`, retrying transient errors (`is_transient`) with backoff; anything else raises at once."""
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except Exception as exc:
            if attempt == attempts or not is_transient(exc):
                raise
            log.info("%s failed (%s); retry %d/%d", what, exc, attempt, attempts - 1)
            time.sleep(delay_s * (2 ** (attempt - 1)) * (1 + random.random()))
    raise AssertionError("unreachable")


def only_transient(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect `retry_condition_fn`: retry the failed task run only if its error is transient."""
    try:
        state.result()
    except Exception as exc:
        return is_transient(exc)
    return False
