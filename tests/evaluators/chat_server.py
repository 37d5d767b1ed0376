"""A small OpenAI-compatible chat-completions server on 127.0.0.1 for judge tests.

Real HTTP over a real socket (``http.server`` in a thread). Replies are scripted: queue
:class:`Reply` objects (an assistant message, a raw status/body, a 429 with Retry-After); when the
queue is empty the server answers with ``default_content``. Every request is logged with its headers
and parsed JSON body so tests can check what the client sent.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One scripted response. ``content`` set: a 200 chat completion with that assistant text.
    Otherwise ``status``/``body``/``headers`` are sent as they are. ``delay_s`` stalls before answering
    (to provoke client timeouts). ``trickle_s`` sends the body one byte at a time, this many seconds
    apart; ``repeat`` sends ``body`` that many times over (a huge answer without holding it whole)."""

    content: str | None = None
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    trickle_s: float = 0.0
    repeat: int = 1

    @classmethod
    def message(cls, content: str) -> Reply:
        return cls(content=content)

    @classmethod
    def rate_limited(cls, retry_after: str | None = "1") -> Reply:
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        return cls(status=429, body=b'{"error": {"message": "rate limited"}}', headers=headers)

    @classmethod
    def error(cls, status: int, body: bytes = b'{"error": {"message": "server error"}}') -> Reply:
        return cls(status=status, body=body)

    @classmethod
    def raw(cls, body: bytes, status: int = 200) -> Reply:
        return cls(status=status, body=body)


def _write_body(out: Any, body: bytes, reply: Reply | None) -> None:
    if reply is not None and reply.trickle_s:
        for i in range(len(body)):
            out.write(body[i : i + 1])
            out.flush()
            time.sleep(reply.trickle_s)
        return
    for _ in range(reply.repeat if reply else 1):
        out.write(body)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out and hung up is expected in timeout tests; no traceback spam.
        pass


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or the raw text when it was not JSON

    def header(self, name: str) -> str | None:
        lowered = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == lowered), None)


def completion_body(content: str, model: str = "loopback-judge") -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-loopback",
            "object": "chat.completion",
            "model": model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            ],
        }
    ).encode()


class ChatServer:
    """Loopback chat-completions server. ``with ChatServer() as server: server.base_url`` -> ``.../v1``."""

    def __init__(self, default_content: str = "Status: failure") -> None:
        self.default_content = default_content
        self.requests: list[RecordedRequest] = []
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._httpd = _QuietServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="chat-server", daemon=True
        )

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def start(self) -> ChatServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _next_reply(self) -> Reply:
        with self._lock:
            return self._replies.popleft() if self._replies else Reply.message(self.default_content)

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
                pass

            def _send(
                self, status: int, body: bytes, headers: dict[str, str], reply: Reply | None = None
            ) -> None:
                repeat = reply.repeat if reply else 1
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body) * repeat))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                _write_body(self.wfile, body, reply)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                server._record(RecordedRequest("POST", self.path, dict(self.headers.items()), body))
                if not self.path.endswith("/chat/completions"):
                    self._send(404, b'{"error": {"message": "not found"}}', {})
                    return
                reply = server._next_reply()
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.content is not None:
                    model = (
                        body.get("model", "loopback-judge") if isinstance(body, dict) else "loopback-judge"
                    )
                    self._send(200, completion_body(reply.content, model), reply.headers, reply)
                else:
                    self._send(reply.status, reply.body, reply.headers, reply)

        return Handler
