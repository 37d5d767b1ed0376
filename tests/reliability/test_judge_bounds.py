"""The HTTP judge against a hostile or broken server on loopback: an answer trickled one byte at a
time is cut off at `timeout_s` (it held a 3 s per-read timeout for 88 s), a huge body is refused
unread (400 MB became a 400-million-character verdict), deep JSON is a bad response (it was an
uncaught RecursionError), and a huge answer is not scanned line by line."""

from __future__ import annotations

import random

import pytest

from distrl_core.evaluators.base import Verdict
from distrl_core.evaluators.judge import JudgeBadResponse, JudgeUnavailable
from distrl_core.evaluators.judge_http import HttpJudgeBackend, HttpJudgeConfig
from distrl_core.evaluators.judge_parse import MAX_ANSWER_CHARS, parse_judge_answer
from distrl_core.evaluators.judge_prompt import JudgePrompt
from tests.evaluators.chat_server import ChatServer, Reply, completion_body

PROMPT = JudgePrompt(system="You judge.", user_text="Did the agent turn off Wi-Fi?", images=())


def _backend(server: ChatServer, **overrides: object) -> HttpJudgeBackend:
    settings: dict[str, object] = {
        "base_url": server.base_url,
        "model": "m",
        "max_retries": 0,
        "timeout_s": 5.0,
    }
    config = HttpJudgeConfig(**(settings | overrides))  # type: ignore[arg-type]
    return HttpJudgeBackend(config, sleep=lambda _: None, rng=random.Random(0))


def test_an_answer_trickled_past_the_deadline_is_cut_off() -> None:
    # ~200 bytes, 0.2 s apart: every read succeeds within its own timeout, the whole takes ~40 s.
    with ChatServer() as server, _backend(server, timeout_s=1.0) as backend:
        server.queue(Reply(content="Status: success", trickle_s=0.2))
        with pytest.raises(JudgeUnavailable, match="timeout_s=1"):
            backend.complete(PROMPT)
        server.queue(Reply.message("Status: success"))  # the next judgement is not affected
        assert backend.complete(PROMPT) == "Status: success"


def test_a_trickled_answer_within_the_deadline_is_read() -> None:
    with ChatServer() as server, _backend(server, timeout_s=30.0) as backend:
        server.queue(Reply(content="Status: success", trickle_s=0.001))
        assert backend.complete(PROMPT) == "Status: success"


def test_a_body_over_the_cap_is_refused_naming_the_limit() -> None:
    with ChatServer() as server, _backend(server, max_response_bytes=64 * 1024) as backend:
        server.queue(Reply(status=200, body=b" " * (1024 * 1024), repeat=400))  # 400 MiB declared
        with pytest.raises(JudgeBadResponse, match="max_response_bytes=65536"):
            backend.complete(PROMPT)
        body = completion_body("Status: failure " + "x" * 70_000)  # a real answer, just too long
        server.queue(Reply.raw(body))
        with pytest.raises(JudgeBadResponse, match="max_response_bytes"):
            backend.complete(PROMPT)
        server.queue(Reply.raw(completion_body("Status: failure")))
        assert backend.complete(PROMPT) == "Status: failure"


def test_deeply_nested_json_is_a_bad_response() -> None:
    depth = 200_000
    with ChatServer() as server, _backend(server) as backend:
        server.queue(Reply.raw(b"[" * depth + b"]" * depth))
        with pytest.raises(JudgeBadResponse, match="nested deeper"):
            backend.complete(PROMPT)
        server.queue(Reply.raw(b'{"choices": [{"message": ' * depth))
        with pytest.raises(JudgeBadResponse):
            backend.complete(PROMPT)


def test_a_huge_answer_is_unknown_without_being_scanned() -> None:
    # `Status:` then a long run of spaces: the old lazy pattern backtracked over it quadratically.
    answer = "Status:" + " " * (MAX_ANSWER_CHARS * 5) + "x"
    assert parse_judge_answer(answer).verdict is Verdict.UNKNOWN
    assert "MAX_ANSWER_CHARS" in parse_judge_answer(answer).reason
    assert parse_judge_answer("Status:" + " " * 1000 + "success  ").verdict is Verdict.SUCCESS
