"""Judge backend for any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, TGI, llama.cpp...).

Screenshots travel as base64 ``data:image/png`` URLs in ``image_url`` content parts. Rate limits (429)
and overload (408, any 5xx, timeouts, refused connections) are retried with capped exponential
backoff and jitter, never waiting less than the server's ``Retry-After``. The API key is sent only in the
``Authorization`` header: it is kept out of reprs, log records and exception messages.

Each attempt is bounded as a whole, not per read: ``timeout_s`` runs from sending the request to the
last byte of the answer (a server sending one byte every 1.5 s held a 3 s per-read timeout for 88 s),
the body may hold at most ``max_response_bytes`` (a 400 MB body became a 400-million-character
verdict), and JSON nested beyond what the parser allows is a bad response, not a RecursionError.
"""

from __future__ import annotations

import base64
import contextlib
import email.utils
import json
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import SecretStr

from distrl_core.evaluators.judge import JudgeBadResponse, JudgeRequestRejected, JudgeUnavailable
from distrl_core.evaluators.judge_prompt import JudgePrompt

log = logging.getLogger(__name__)

ENV_BASE_URL = "DISTRL_JUDGE_BASE_URL"
ENV_MODEL = "DISTRL_JUDGE_MODEL"
ENV_API_KEY = "DISTRL_JUDGE_API_KEY"
ENV_API_KEY_FALLBACK = "OPENAI_API_KEY"


def is_retryable_status(code: int) -> bool:
    """Rate limits, request timeouts and any server-side error are worth another try."""
    return code in (408, 429) or code >= 500


@dataclass(frozen=True)
class HttpJudgeConfig:
    """Settings of the chat-completions judge. :meth:`from_env` fills them from the environment.

    base_url: API root; requests go to ``<base_url>/chat/completions`` (e.g. ``https://api.openai.com/v1``).
        Env: ``DISTRL_JUDGE_BASE_URL``.
    model: model name sent in the request. Env: ``DISTRL_JUDGE_MODEL``.
    api_key: bearer token; None sends no Authorization header (fine for a local vLLM without auth).
        Env: ``DISTRL_JUDGE_API_KEY``, else ``OPENAI_API_KEY``. Never printed: repr shows ``**********``.
    send_images: attach screenshots; set False for a text-only model (it then reads the compact UI text).
    timeout_s: the most one attempt may take, from sending the request to the answer's last byte
        (the connection's setup included); a server still sending then is cut off, and the attempt
        counts as timed out. A judgement takes at most (max_retries + 1) x timeout_s plus the backoffs.
    max_response_bytes: the largest answer body read; a larger one is a bad response (a chat
        completion of max_tokens tokens is a few kilobytes).
    connect_timeout_s: connection timeout of one request in seconds.
    max_retries: retries after the first attempt on 429/5xx, timeouts and connection errors.
    backoff_base_s: first backoff delay; doubles each retry (with jitter), never below Retry-After.
    backoff_cap_s: longest single wait, also applied to a server's Retry-After so a worker never stalls
        for long; a server still limiting after the retries makes the judgement ``unknown``.
    max_tokens: cap on the judge's answer length.
    temperature: sampling temperature; 0 for the most repeatable verdicts.
    jitter_seed: seed of the backoff jitter RNG (None: random), for reproducible retry timing.
    """

    base_url: str
    model: str
    api_key: SecretStr | None = field(default=None, repr=False)
    send_images: bool = True
    timeout_s: float = 60.0
    max_response_bytes: int = 1024 * 1024
    connect_timeout_s: float = 10.0
    max_retries: int = 5
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 30.0
    max_tokens: int = 256
    temperature: float = 0.0
    jitter_seed: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.api_key, str):
            object.__setattr__(self, "api_key", SecretStr(self.api_key) if self.api_key else None)
        self._check_endpoint()
        self._check_limits()

    def _check_endpoint(self) -> None:
        if not self.base_url:
            raise ValueError(
                f"HttpJudgeConfig.base_url is empty: set {ENV_BASE_URL} (e.g. https://api.openai.com/v1 or "
                "http://127.0.0.1:8000/v1 for a local vLLM) or pass base_url=."
            )
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"HttpJudgeConfig.base_url {self.base_url!r} is not an http(s) URL: set {ENV_BASE_URL} to "
                "something like https://api.openai.com/v1."
            )
        if parts.username or parts.password:
            raise ValueError(
                f"HttpJudgeConfig.base_url must not carry credentials: remove them from the URL and set "
                f"{ENV_API_KEY} instead."
            )
        if not self.model:
            raise ValueError(f"HttpJudgeConfig.model is empty: set {ENV_MODEL} (e.g. gpt-4o) or pass model=.")

    def _check_limits(self) -> None:
        if self.timeout_s <= 0 or self.connect_timeout_s <= 0:
            raise ValueError("HttpJudgeConfig timeouts must be > 0 seconds.")
        if self.max_response_bytes < 1024:
            raise ValueError(
                f"HttpJudgeConfig.max_response_bytes must be >= 1024 (got {self.max_response_bytes})."
            )
        if self.max_retries < 0:
            raise ValueError(f"HttpJudgeConfig.max_retries must be >= 0 (got {self.max_retries}).")
        if self.backoff_base_s < 0 or self.backoff_cap_s < self.backoff_base_s:
            raise ValueError(
                "HttpJudgeConfig backoff: need 0 <= backoff_base_s <= backoff_cap_s "
                f"(got base {self.backoff_base_s}, cap {self.backoff_cap_s})."
            )
        if self.max_tokens < 1:
            raise ValueError(f"HttpJudgeConfig.max_tokens must be >= 1 (got {self.max_tokens}).")
        if self.temperature < 0:
            raise ValueError(f"HttpJudgeConfig.temperature must be >= 0 (got {self.temperature}).")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> HttpJudgeConfig:
        """Reads base URL, model and key from ``env`` (default ``os.environ``); keyword overrides win."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {
            "base_url": env.get(ENV_BASE_URL, "").strip(),
            "model": env.get(ENV_MODEL, "").strip(),
            "api_key": env.get(ENV_API_KEY) or env.get(ENV_API_KEY_FALLBACK) or None,
        }
        values.update(overrides)
        return cls(**values)

    @property
    def endpoint(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"


def png_data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def build_chat_request(prompt: JudgePrompt, config: HttpJudgeConfig) -> dict[str, Any]:
    """The chat-completions request body for one judgement."""
    content: list[dict[str, Any]] = [{"type": "text", "text": prompt.user_text}]
    if config.send_images:
        content.extend(
            {"type": "image_url", "image_url": {"url": png_data_url(png)}} for png in prompt.images
        )
    return {
        "model": config.model,
        "messages": [{"role": "system", "content": prompt.system}, {"role": "user", "content": content}],
        "max_tokens": config.max_tokens,
        "temperature": config.temperature,
    }


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP date); None when absent/invalid."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def extract_message_text(payload: Any) -> str:
    """The assistant text from a chat-completions response body; raises JudgeBadResponse otherwise."""
    try:
        content = payload["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise JudgeBadResponse(f"response has no choices[0].message.content ({type(exc).__name__})") from None
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some servers return content parts even for text
        texts = [
            part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text"
        ]
        return "".join(t for t in texts if isinstance(t, str))
    raise JudgeBadResponse(f"message content is {type(content).__name__}, not text")


class HttpJudgeBackend:
    """Sends judge prompts to an OpenAI-compatible endpoint. Use as a context manager or call close()."""

    def __init__(
        self,
        config: HttpJudgeConfig,
        *,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self._sleep = sleep
        self._rng = rng or random.Random(config.jitter_seed)
        # No kept-alive connections: each attempt opens its own, so that the deadline can cut its socket.
        self._client = httpx.Client(
            timeout=httpx.Timeout(config.timeout_s, connect=config.connect_timeout_s),
            limits=httpx.Limits(max_keepalive_connections=0),
        )

    @property
    def name(self) -> str:
        return f"http:{self.config.model}"

    @property
    def uses_images(self) -> bool:
        return self.config.send_images

    def __repr__(self) -> str:
        return f"HttpJudgeBackend(endpoint={self.config.endpoint!r}, model={self.config.model!r})"

    def __enter__(self) -> HttpJudgeBackend:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    def _scrub(self, text: str) -> str:
        """Removes the API key from text that came from the server (some echo a bad key back)."""
        key = self.config.api_key.get_secret_value() if self.config.api_key else ""
        return text.replace(key, "**********") if key else text

    def backoff_delay(self, retry: int, retry_after: float | None) -> float:
        """Wait before retry number ``retry`` (0-based): jittered exponential, at least Retry-After, capped."""
        ceiling = min(self.config.backoff_cap_s, self.config.backoff_base_s * 2.0**retry)
        delay = ceiling / 2 + self._rng.uniform(0.0, ceiling / 2)  # "equal jitter": spreads a thundering herd
        if retry_after is not None:
            delay = max(delay, retry_after)
        return min(delay, self.config.backoff_cap_s)

    def complete(self, prompt: JudgePrompt) -> str:
        body = build_chat_request(prompt, self.config)
        headers = {"Content-Type": "application/json"}
        if self.config.api_key is not None:
            headers["Authorization"] = f"Bearer {self.config.api_key.get_secret_value()}"
        endpoint = self.config.endpoint
        attempts = self.config.max_retries + 1
        problem = "no attempt made"
        for attempt in range(attempts):
            retry_after: float | None = None
            try:
                code, response_headers, raw = self._exchange(endpoint, body, headers)
            except _DeadlinePassed:
                problem = f"timed out (no complete answer within timeout_s={self.config.timeout_s:g} s)"
            except httpx.TimeoutException as exc:
                problem = f"timed out ({type(exc).__name__})"
            except httpx.TransportError as exc:
                problem = f"connection failed ({type(exc).__name__})"
            else:
                text = raw.decode("utf-8", errors="replace")
                if is_retryable_status(code):
                    retry_after = parse_retry_after(response_headers.get("Retry-After"))
                    problem = f"HTTP {code}"
                elif code >= 400:
                    raise JudgeRequestRejected(f"HTTP {code} from {endpoint}: {self._scrub(text[:300])}")
                else:
                    return extract_message_text(self._json(raw, code, endpoint))
            if attempt + 1 < attempts:
                delay = self.backoff_delay(attempt, retry_after)
                log.info(
                    "judge endpoint %s: %s; retry %d/%d in %.2fs",
                    endpoint,
                    problem,
                    attempt + 1,
                    self.config.max_retries,
                    delay,
                )
                self._sleep(delay)
        raise JudgeUnavailable(f"{problem} from {endpoint}, gave up after {attempts} attempts")

    def _exchange(
        self, endpoint: str, body: Any, headers: dict[str, str]
    ) -> tuple[int, httpx.Headers, bytes]:
        """One attempt within `timeout_s` from start to end: status, headers and at most
        `max_response_bytes` of body. httpx's timeouts are per read, so a timer shuts the
        connection's socket down at the deadline (a blocked read then returns at once)."""
        sockets: list[socket.socket] = []

        def trace(event: str, info: dict[str, Any]) -> None:
            if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
                stream = info.get("return_value")
                sock = stream.get_extra_info("socket") if stream is not None else None
                if sock is not None:
                    sockets.append(sock)

        passed = threading.Event()

        def cut() -> None:
            passed.set()
            for sock in sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

        timer = threading.Timer(self.config.timeout_s, cut)
        timer.daemon = True
        timer.start()
        try:
            with self._client.stream(
                "POST", endpoint, json=body, headers=headers, extensions={"trace": trace}
            ) as response:
                return response.status_code, response.headers, self._read_capped(response, endpoint)
        except httpx.HTTPError:
            if passed.is_set():
                raise _DeadlinePassed from None
            raise
        finally:
            timer.cancel()

    def _read_capped(self, response: httpx.Response, endpoint: str) -> bytes:
        cap = self.config.max_response_bytes
        declared = response.headers.get("Content-Length", "")
        too_large = f"answer from {endpoint} is larger than max_response_bytes={cap}"
        if declared.isdigit() and int(declared) > cap:
            raise JudgeBadResponse(f"{too_large} (Content-Length {declared}); raise the limit if it is real")
        data = bytearray()
        for chunk in response.iter_bytes():
            data += chunk
            if len(data) > cap:
                raise JudgeBadResponse(f"{too_large}; raise the limit if it is real")
        return bytes(data)

    def _json(self, raw: bytes, code: int, endpoint: str) -> Any:
        try:
            return json.loads(raw)
        except RecursionError:  # C's parser checks its depth: nothing is left half-done
            raise JudgeBadResponse(
                f"HTTP {code} from {endpoint} with JSON nested deeper than the parser allows"
            ) from None
        except ValueError:
            raise JudgeBadResponse(
                f"HTTP {code} from {endpoint} with a body that is not JSON: "
                f"{self._scrub(raw[:120].decode('utf-8', errors='replace'))!r}"
            ) from None


class _DeadlinePassed(Exception):
    """An attempt's `timeout_s` ran out and its connection was cut."""
