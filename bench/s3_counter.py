"""A moto S3 server on a loopback port that counts every request it answers, by phase and kind.

The counting sits in front of moto's WSGI application, so it sees exactly what reaches "S3" from
any client in any process (s3fs's aiobotocore, boto3, MLflow's artifact repository), with the
bytes in both directions. The bench sets `phase` before each part it measures.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server


@dataclass
class Tally:
    requests: int = 0
    bytes_in: int = 0  # request bodies (uploads)
    bytes_out: int = 0  # response bodies (downloads, listings)
    keys: int = 0  # object keys in LIST responses

    def add(self, bytes_in: int, bytes_out: int, keys: int = 0) -> None:
        self.requests += 1
        self.bytes_in += bytes_in
        self.bytes_out += bytes_out
        self.keys += keys


@dataclass
class S3Counter:
    """The WSGI middleware: `counts[(phase, kind)]` and the keys' prefixes written per phase."""

    app: Callable[..., Iterable[bytes]]
    phase: str = "setup"
    counts: dict[tuple[str, str], Tally] = field(default_factory=dict)
    prefixes: dict[tuple[str, str], int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        kind, prefix = classify(
            environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", "")
        )
        length = environ.get("HTTP_X_AMZ_DECODED_CONTENT_LENGTH") or environ.get("CONTENT_LENGTH") or 0
        body = self.app(environ, start_response)
        try:
            chunks = list(body)
        finally:
            close = getattr(body, "close", None)
            if close is not None:
                close()
        with self.lock:
            keys = b"".join(chunks).count(b"<Key>") if kind == "LIST" else 0
            self.counts.setdefault((self.phase, kind), Tally()).add(int(length), sum(map(len, chunks)), keys)
            if kind in ("PUT", "POST"):
                self.prefixes[(self.phase, prefix)] = self.prefixes.get((self.phase, prefix), 0) + 1
        return chunks

    def phase_totals(self, phase: str) -> dict[str, dict[str, int]]:
        with self.lock:
            return {k: vars(t).copy() for (p, k), t in sorted(self.counts.items()) if p == phase}

    def phase_prefixes(self, phase: str) -> dict[str, int]:
        with self.lock:
            return {k: n for (p, k), n in sorted(self.prefixes.items()) if p == phase}


def classify(method: str, path: str, query: str) -> tuple[str, str]:
    """("LIST" / "GET" / "PUT" / ..., the key's folder) of one path-style S3 request."""
    parts = path.lstrip("/").split("/", 1)
    key = parts[1] if len(parts) > 1 else ""
    folder = key.rsplit("/", 1)[0] if "/" in key else ""
    if not key:
        kind = {"GET": "LIST", "HEAD": "HEAD_BUCKET", "PUT": "CREATE_BUCKET"}.get(method, f"{method}_BUCKET")
    elif method == "PUT" and "partNumber" in query:
        kind = "PUT_PART"
    else:
        kind = method
    return kind, folder


@contextmanager
def counting_s3(host: str = "127.0.0.1") -> Iterator[tuple[str, S3Counter]]:
    """(endpoint URL, counter) of a fresh moto S3 server, stopped on exit."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request otherwise
    counter = S3Counter(DomainDispatcherApplication(create_backend_app))
    server = make_server(host, 0, counter, threaded=True, request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, name="moto-s3", daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_port}", counter
    finally:
        server.shutdown()
        thread.join()
