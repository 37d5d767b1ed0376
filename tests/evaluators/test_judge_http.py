from __future__ import annotations

import base64
import io
import logging
import random
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from PIL import Image

from distrl_core.evaluators.base import EpisodeContext, Verdict
from distrl_core.evaluators.judge import (
    JudgeBadResponse,
    JudgeRequestRejected,
    JudgeUnavailable,
    ModelJudge,
)
from distrl_core.evaluators.judge_http import HttpJudgeBackend, HttpJudgeConfig, parse_retry_after
from distrl_core.evaluators.judge_prompt import JudgePrompt
from tests.evaluators.chat_server import ChatServer, Reply

API_KEY = "sk-test-DO-NOT-LEAK-4f9a1c"


def png(color: tuple[int, int, int], size: tuple[int, int] = (27, 60)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return buffer.getvalue()


class RecordingSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as chat_server:
        yield chat_server


@pytest.fixture
def sleep() -> RecordingSleep:
    return RecordingSleep()


def make_backend(server: ChatServer, sleep: RecordingSleep, **overrides: object) -> HttpJudgeBackend:
    settings: dict[str, object] = {
        "base_url": server.base_url,
        "model": "judge-model",
        "api_key": API_KEY,
        "max_retries": 3,
        "backoff_base_s": 0.5,
        "backoff_cap_s": 8.0,
        "timeout_s": 5.0,
    }
    settings.update(overrides)
    return HttpJudgeBackend(HttpJudgeConfig(**settings), sleep=sleep, rng=random.Random(7))  # type: ignore[arg-type]


CONTEXT = EpisodeContext(
    instruction="Turn off Wi-Fi",
    screenshots=(png((10, 10, 10)), png((200, 30, 30))),
    actions=("tap(3)", "key(BACK)"),
    ui_text="[0] Wi-Fi switch off",
)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("Expected: Wi-Fi off\nObserved: Wi-Fi off\nStatus: success", Verdict.SUCCESS),
        ("Expected: Wi-Fi off\nObserved: Wi-Fi on\nStatus: failure", Verdict.FAILURE),
        ("I cannot tell from this image.", Verdict.UNKNOWN),
    ],
)
def test_answers_map_to_verdicts(
    server: ChatServer, sleep: RecordingSleep, answer: str, expected: Verdict
) -> None:
    server.queue(Reply.message(answer))
    with make_backend(server, sleep) as backend:
        result = ModelJudge(backend).evaluate(CONTEXT)
    assert result.verdict is expected
    assert result.source == "judge:http:judge-model"
    assert not result.skipped_call
    assert server.request_count == 1


def test_request_carries_instruction_actions_image_and_auth(
    server: ChatServer, sleep: RecordingSleep
) -> None:
    server.queue(Reply.message("Status: success"))
    with make_backend(server, sleep, max_tokens=64) as backend:
        ModelJudge(backend).evaluate(CONTEXT)
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.header("Authorization") == f"Bearer {API_KEY}"
    body = request.body
    assert body["model"] == "judge-model"
    assert body["max_tokens"] == 64
    system, user = body["messages"]
    assert system["role"] == "system"
    texts = [part["text"] for part in user["content"] if part["type"] == "text"]
    images = [part["image_url"]["url"] for part in user["content"] if part["type"] == "image_url"]
    assert "Turn off Wi-Fi" in texts[0]
    assert "key(BACK)" in texts[0]
    # default: only the newest screenshot, as a base64 PNG data URL
    assert len(images) == 1
    prefix = "data:image/png;base64,"
    assert images[0].startswith(prefix)
    assert base64.b64decode(images[0][len(prefix) :]) == CONTEXT.screenshots[-1]


def test_text_only_endpoint_gets_ui_text_instead_of_images(server: ChatServer, sleep: RecordingSleep) -> None:
    with make_backend(server, sleep, send_images=False) as backend:
        ModelJudge(backend).evaluate(CONTEXT)
    content = server.requests[0].body["messages"][1]["content"]
    assert [part["type"] for part in content] == ["text"]
    assert "[0] Wi-Fi switch off" in content[0]["text"]


def test_no_api_key_sends_no_authorization_header(server: ChatServer, sleep: RecordingSleep) -> None:
    with make_backend(server, sleep, api_key=None) as backend:
        backend.complete(JudgePrompt(system="s", user_text="u"))
    assert server.requests[0].header("Authorization") is None


def test_rate_limit_then_success_backs_off_at_least_retry_after(
    server: ChatServer, sleep: RecordingSleep
) -> None:
    server.queue(Reply.rate_limited("2"), Reply(status=503, body=b"{}"), Reply.message("Status: success"))
    with make_backend(server, sleep) as backend:
        answer = backend.complete(JudgePrompt(system="s", user_text="u"))
    assert answer == "Status: success"
    assert server.request_count == 3
    assert len(sleep.delays) == 2
    assert 2.0 <= sleep.delays[0] <= 8.0  # honours Retry-After, within the cap
    # second retry has no Retry-After: jittered exponential in [base*2/2, base*2]
    assert 0.5 <= sleep.delays[1] <= 1.0


def test_retry_after_beyond_cap_is_clamped(server: ChatServer, sleep: RecordingSleep) -> None:
    server.queue(Reply.rate_limited("3600"), Reply.message("Status: failure"))
    with make_backend(server, sleep) as backend:
        assert backend.complete(JudgePrompt(system="s", user_text="u")) == "Status: failure"
    assert sleep.delays == [8.0]


def test_server_errors_exhaust_retries_with_bounded_backoff(
    server: ChatServer, sleep: RecordingSleep
) -> None:
    server.queue(*[Reply.error(500)] * 10)
    with (
        make_backend(server, sleep, max_retries=4) as backend,
        pytest.raises(JudgeUnavailable, match=r"HTTP 500 .* after 5 attempts"),
    ):
        backend.complete(JudgePrompt(system="s", user_text="u"))
    assert server.request_count == 5
    assert len(sleep.delays) == 4
    ceilings = [min(8.0, 0.5 * 2**n) for n in range(4)]
    for delay, ceiling in zip(sleep.delays, ceilings, strict=True):
        assert ceiling / 2 <= delay <= ceiling


def test_judge_maps_exhausted_retries_to_unknown(server: ChatServer, sleep: RecordingSleep) -> None:
    server.queue(*[Reply.error(503)] * 3)
    with make_backend(server, sleep, max_retries=2) as backend:
        result = ModelJudge(backend).evaluate(CONTEXT)
    assert result.verdict is Verdict.UNKNOWN
    assert "HTTP 503" in result.reason


@pytest.mark.parametrize(
    "reply",
    [
        Reply.raw(b"<html>bad gateway page</html>"),
        Reply.raw(b'{"choices": []}'),
        Reply.raw(b'{"choices": [{"message": {"role": "assistant"}}]}'),
        Reply.raw(b'{"choices": [{"message": {"content": 42}}]}'),
    ],
)
def test_malformed_bodies_raise_bad_response_and_judge_says_unknown(
    server: ChatServer, sleep: RecordingSleep, reply: Reply
) -> None:
    server.queue(reply, reply)
    with make_backend(server, sleep) as backend:
        with pytest.raises(JudgeBadResponse):
            backend.complete(JudgePrompt(system="s", user_text="u"))
        assert ModelJudge(backend).evaluate(CONTEXT).verdict is Verdict.UNKNOWN
    assert sleep.delays == []  # not retried


def test_content_parts_are_joined(server: ChatServer, sleep: RecordingSleep) -> None:
    server.queue(
        Reply.raw(
            b'{"choices": [{"message": {"content": [{"type": "text", "text": "Status: "}, {"type": "text", "text": "success"}]}}]}'
        )
    )
    with make_backend(server, sleep) as backend:
        assert backend.complete(JudgePrompt(system="s", user_text="u")) == "Status: success"


def test_api_key_never_in_logs_exceptions_or_reprs(
    server: ChatServer, sleep: RecordingSleep, caplog: pytest.LogCaptureFixture
) -> None:
    # the server echoes the key back in an auth error, as some providers do
    server.queue(Reply.rate_limited("1"), Reply.message("Status: success"))
    server.queue(Reply.error(401, f'{{"error": "Incorrect API key provided: {API_KEY}"}}'.encode()))
    server.queue(*[Reply.error(500)] * 4)
    caplog.set_level(logging.DEBUG)  # every logger, httpx and httpcore included
    with make_backend(server, sleep) as backend:
        judge = ModelJudge(backend)
        assert judge.evaluate(CONTEXT).verdict is Verdict.SUCCESS
        with pytest.raises(JudgeRequestRejected) as rejected:
            backend.complete(JudgePrompt(system="s", user_text="u"))
        unknown = judge.evaluate(EpisodeContext(instruction="x", screenshots=(png((1, 2, 3)),)))
        texts = [str(rejected.value), repr(rejected.value), unknown.reason, repr(backend), repr(judge)]
        texts += [repr(backend.config), str(backend.config)]
    assert "HTTP 401" in str(rejected.value)
    assert unknown.verdict is Verdict.UNKNOWN
    assert any("retry" in record.getMessage() for record in caplog.records)  # logging did happen
    assert server.requests[0].header("Authorization") == f"Bearer {API_KEY}"  # the header was sent
    for text in [*texts, caplog.text]:
        assert API_KEY not in text


def test_timeout_is_retried_then_reported(server: ChatServer, sleep: RecordingSleep) -> None:
    server.queue(Reply(content="Status: success", delay_s=1.0), Reply.message("Status: failure"))
    with make_backend(server, sleep, timeout_s=0.2, max_retries=1) as backend:
        assert backend.complete(JudgePrompt(system="s", user_text="u")) == "Status: failure"
    assert len(sleep.delays) == 1


def test_refused_connection_raises_unavailable(sleep: RecordingSleep) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = HttpJudgeConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=2)
    with (
        HttpJudgeBackend(config, sleep=sleep) as backend,
        pytest.raises(JudgeUnavailable, match="connection failed"),
    ):
        backend.complete(JudgePrompt(system="s", user_text="u"))
    assert len(sleep.delays) == 2


def test_config_from_env_and_its_errors() -> None:
    env = {
        "DISTRL_JUDGE_BASE_URL": "https://judge.example/v1",
        "DISTRL_JUDGE_MODEL": "m1",
        "OPENAI_API_KEY": API_KEY,
    }
    config = HttpJudgeConfig.from_env(env)
    assert config.endpoint == "https://judge.example/v1/chat/completions"
    assert config.api_key is not None and config.api_key.get_secret_value() == API_KEY
    preferred = HttpJudgeConfig.from_env({**env, "DISTRL_JUDGE_API_KEY": "sk-other"})
    assert preferred.api_key is not None and preferred.api_key.get_secret_value() == "sk-other"
    assert HttpJudgeConfig.from_env(env, model="m2").model == "m2"

    with pytest.raises(ValueError, match="DISTRL_JUDGE_BASE_URL"):
        HttpJudgeConfig.from_env({"DISTRL_JUDGE_MODEL": "m"})
    with pytest.raises(ValueError, match="DISTRL_JUDGE_MODEL"):
        HttpJudgeConfig.from_env({"DISTRL_JUDGE_BASE_URL": "http://127.0.0.1:1/v1"})
    with pytest.raises(ValueError, match="not an http"):
        HttpJudgeConfig(base_url="127.0.0.1:8000/v1", model="m")
    with pytest.raises(ValueError, match="DISTRL_JUDGE_API_KEY"):
        HttpJudgeConfig(base_url="https://user:secret@judge.example/v1", model="m")
    with pytest.raises(ValueError, match="max_retries"):
        HttpJudgeConfig(base_url="https://judge.example/v1", model="m", max_retries=-1)


def test_parse_retry_after_forms() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("1.5") == 1.5
    assert parse_retry_after(format_datetime(now + timedelta(seconds=30), usegmt=True), now=now) == 30.0
    assert parse_retry_after(format_datetime(now - timedelta(seconds=30), usegmt=True), now=now) == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


@pytest.mark.parametrize("status", [400, 404, 422])
def test_client_errors_are_rejected_without_retry(
    server: ChatServer, sleep: RecordingSleep, status: int
) -> None:
    server.queue(Reply.error(status, b'{"error": {"message": "model not found"}}'))
    with make_backend(server, sleep) as backend, pytest.raises(JudgeRequestRejected, match=f"HTTP {status}"):
        backend.complete(JudgePrompt(system="s", user_text="u"))
    assert server.request_count == 1
    assert sleep.delays == []


@pytest.mark.parametrize("status", [408, 502, 504, 529])
def test_transient_statuses_are_retried(server: ChatServer, sleep: RecordingSleep, status: int) -> None:
    server.queue(Reply.error(status), Reply.message("Status: failure"))
    with make_backend(server, sleep) as backend:
        assert backend.complete(JudgePrompt(system="s", user_text="u")) == "Status: failure"
    assert server.request_count == 2
