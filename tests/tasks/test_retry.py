"""`with_retries` tries a transient error again and lets anything else out on the first attempt."""

from __future__ import annotations

import errno
import sqlite3

import pytest
import requests
from mlflow.exceptions import MlflowException, RestException
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE, TEMPORARILY_UNAVAILABLE

from tasks.retry import is_transient, with_retries


def _failing(errors: list[Exception], result: str = "done"):
    calls = []

    def fn() -> str:
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return result

    return fn, calls


def test_a_type_error_raises_on_the_first_attempt() -> None:
    fn, calls = _failing([TypeError("log_batch() got an unexpected keyword argument")])
    with pytest.raises(TypeError):
        with_retries(fn, "logging", delay_s=1e-4)
    assert len(calls) == 1


def test_a_transient_error_is_retried_until_it_passes() -> None:
    fn, calls = _failing([sqlite3.OperationalError("database is locked"), ConnectionResetError()])
    assert with_retries(fn, "logging", delay_s=1e-4) == "done"
    assert len(calls) == 3


def test_a_lasting_transient_error_raises_after_every_attempt() -> None:
    fn, calls = _failing([TimeoutError()] * 10)
    with pytest.raises(TimeoutError):
        with_retries(fn, "logging", attempts=4, delay_s=1e-4)
    assert len(calls) == 4


def _raised_while_handling(cause: Exception, error: Exception) -> Exception:
    """`error` as MLflow's REST client raises it: inside the `except` of the request's error."""
    try:
        try:
            raise cause
        except Exception:
            raise error  # noqa: B904 — the implicit context is what MLflow leaves
    except Exception as exc:
        return exc


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (ConnectionRefusedError(), True),
        (sqlite3.OperationalError("database is locked"), True),
        (sqlite3.OperationalError("no such table: runs"), False),
        (MlflowException("locked", error_code=TEMPORARILY_UNAVAILABLE), True),
        (MlflowException("bad value", error_code=INVALID_PARAMETER_VALUE), False),
        (MlflowException("a bug"), False),
        (RestException({"error_code": "INTERNAL_ERROR", "message": "server"}), True),
        (RestException({"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "no run"}), False),
        (
            _raised_while_handling(
                requests.ConnectionError("refused"), MlflowException("API request failed")
            ),
            True,
        ),
        (OSError(errno.EBUSY, "SlowDown"), True),  # s3fs's S3 503
        (PermissionError(errno.EACCES, "AccessDenied"), False),
        (KeyError("run_id"), False),
        (ValueError("bad metric"), False),
    ],
)
def test_what_counts_as_transient(exc: Exception, transient: bool) -> None:
    assert is_transient(exc) is transient
