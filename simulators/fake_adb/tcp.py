"""A threaded TCP listener that can be stopped cleanly, with every client connection closed and joined.

``socketserver.ThreadingTCPServer`` alone leaves handler threads blocked in ``recv`` on shutdown; this
wrapper remembers the live client sockets and shuts them down so each handler returns, then joins them.
Every client socket also gets an idle timeout: a client that connects and then sends nothing (a
half-open or abandoned connection) is dropped, so it does not hold a thread forever.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import socketserver
import threading
from collections.abc import Callable

from simulators.fake_adb.wire import ClientGone

logger = logging.getLogger(__name__)

ConnectionHandler = Callable[[socket.socket], None]


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    request_queue_size = 128  # bursts of connections (a client pool, a probe) wait in the backlog
    daemon_threads = False
    block_on_close = True

    def __init__(self, address: tuple[str, int], handle: ConnectionHandler, idle_timeout_s: float | None):
        self.handle_connection = handle
        self.idle_timeout_s = idle_timeout_s
        self.live: set[socket.socket] = set()
        self.live_lock = threading.Lock()
        self.closing = False
        super().__init__(address, _Handler)


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # Each blocking recv/send then raises TimeoutError after this long without progress.
        sock.settimeout(self.server.idle_timeout_s)
        with self.server.live_lock:
            if self.server.closing:  # accepted just before stop(): do not start a conversation
                return
            self.server.live.add(sock)
        try:
            self.server.handle_connection(sock)
        except (ClientGone, ConnectionError, TimeoutError):
            pass  # the client went away mid-conversation: nothing to answer
        except OSError as error:
            logger.debug("connection ended with %s", error)
        except Exception:
            logger.exception("fake adb: unexpected error while serving a connection")
        finally:
            with self.server.live_lock:
                self.server.live.discard(sock)


class TcpService:
    """Listens on ``host:port`` (0 picks a free port) and runs ``handle(sock)`` per connection in a thread.

    ``idle_timeout_s``: how long one read or write may wait for the client (None: forever).
    """

    def __init__(
        self, host: str, port: int, handle: ConnectionHandler, name: str, idle_timeout_s: float | None = 60.0
    ):
        if idle_timeout_s is not None and idle_timeout_s <= 0:
            raise ValueError(
                f"idle_timeout_s must be > 0 seconds (or None for no timeout), got {idle_timeout_s}"
            )
        self._server = _Server((host, port), handle, idle_timeout_s)
        self._name = name
        self._thread: threading.Thread | None = None
        self._stop_lock = threading.Lock()
        self._stopped = False

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name=self._name, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting, end every open conversation, join all threads. Safe to call twice."""
        with self._stop_lock:
            if self._stopped:
                return
            self._stopped = True
            if self._thread is not None:
                self._server.shutdown()
                self._thread.join()
                self._thread = None
            self._close_live_connections()
            self._server.server_close()  # joins the handler threads (block_on_close)

    def _close_live_connections(self) -> None:
        with self._server.live_lock:
            self._server.closing = True
            live = list(self._server.live)
        for sock in live:
            with contextlib.suppress(OSError):  # already closed by its handler
                sock.shutdown(socket.SHUT_RDWR)
