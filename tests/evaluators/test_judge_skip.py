"""The judge skips re-judging an unchanged screen of the same episode (counted at the loopback server)."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator

import pytest
from PIL import Image

from distrl_core.evaluators.base import EpisodeContext, Evaluator, Verdict
from distrl_core.evaluators.judge import JudgeConfig, ModelJudge
from distrl_core.evaluators.judge_http import HttpJudgeBackend, HttpJudgeConfig
from distrl_core.evaluators.judge_prompt import build_judge_prompt
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from simulators.simdroid import SimDroidConfig, load_tasks
from simulators.simdroid.expert import expert_action
from tests.evaluators.chat_server import ChatServer, Reply


def png(shade: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("L", (20, 40), shade).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer(default_content="Status: success") as chat_server:
        yield chat_server


def make_judge(server: ChatServer, **config: object) -> ModelJudge:
    backend = HttpJudgeBackend(HttpJudgeConfig(base_url=server.base_url, model="m", max_retries=0))
    return ModelJudge(backend, JudgeConfig(**config))  # type: ignore[arg-type]


def context(
    shade: int, actions: tuple[str, ...] = ("tap(1)",), episode: str | None = "ep-1"
) -> EpisodeContext:
    return EpisodeContext(
        instruction="Open Settings", screenshots=(png(shade),), actions=actions, episode_id=episode
    )


def test_model_judge_is_an_evaluator(server: ChatServer) -> None:
    assert isinstance(make_judge(server), Evaluator)


def test_unchanged_screen_skips_the_call_and_returns_cached_verdict(server: ChatServer) -> None:
    judge = make_judge(server)
    first = judge.evaluate(context(10))
    second = judge.evaluate(context(10))
    assert server.request_count == 1
    assert first.verdict is second.verdict is Verdict.SUCCESS
    assert not first.skipped_call
    assert second.skipped_call
    assert judge.calls == 1


def test_changed_screen_or_actions_or_episode_is_judged_again(server: ChatServer) -> None:
    judge = make_judge(server)
    judge.evaluate(context(10))
    judge.evaluate(context(11))  # screen changed
    judge.evaluate(context(11, actions=("tap(1)", "tap(2)")))  # action list changed
    judge.evaluate(context(11, actions=("tap(1)", "tap(2)"), episode="ep-2"))  # other episode
    judge.evaluate(context(11, actions=("tap(1)", "tap(2)"), episode=None))  # no episode id: never cached
    judge.evaluate(context(11, actions=("tap(1)", "tap(2)"), episode=None))
    assert server.request_count == 6


def test_screen_only_key_skips_despite_new_actions(server: ChatServer) -> None:
    judge = make_judge(server, cache_key_includes_actions=False)
    judge.evaluate(context(10, actions=("tap(1)",)))
    result = judge.evaluate(context(10, actions=("tap(1)", "tap(1)")))
    assert result.skipped_call
    assert server.request_count == 1


def test_only_the_last_judged_screen_counts(server: ChatServer) -> None:
    judge = make_judge(server)
    judge.evaluate(context(10))
    judge.evaluate(context(20))
    judge.evaluate(context(10))  # back to an earlier screen: not the last judged one
    assert server.request_count == 3


def test_unknown_verdicts_are_not_cached(server: ChatServer) -> None:
    server.queue(Reply.message("hmm, hard to say"), Reply.message("Status: failure"))
    judge = make_judge(server)
    assert judge.evaluate(context(10)).verdict is Verdict.UNKNOWN
    again = judge.evaluate(context(10))
    assert again.verdict is Verdict.FAILURE
    assert not again.skipped_call
    assert server.request_count == 2


def test_skip_disabled_and_forget(server: ChatServer) -> None:
    no_skip = make_judge(server, skip_unchanged=False)
    no_skip.evaluate(context(10))
    no_skip.evaluate(context(10))
    assert server.request_count == 2

    judge = make_judge(server)
    judge.evaluate(context(10))
    judge.forget("ep-1")
    judge.evaluate(context(10))
    assert server.request_count == 4


def test_cache_is_bounded(server: ChatServer) -> None:
    judge = make_judge(server, max_cached_episodes=2)
    for episode in ("a", "b", "c"):
        judge.evaluate(context(10, episode=episode))
    assert judge.evaluate(context(10, episode="c")).skipped_call
    assert not judge.evaluate(context(10, episode="a")).skipped_call  # evicted
    assert server.request_count == 4


def test_judge_config_errors_name_the_field() -> None:
    with pytest.raises(ValueError, match="max_screenshots"):
        JudgeConfig(max_screenshots=0)
    with pytest.raises(ValueError, match="skip_unchanged=False"):
        JudgeConfig(max_cached_episodes=0)


def test_prompt_shows_recent_actions_and_caps_ui_text() -> None:
    ctx = EpisodeContext(
        instruction="Search for pizza",
        screenshots=(png(1), png(2), png(3)),
        actions=tuple(f"tap({n})" for n in range(9)),
        ui_text="x" * 50,
    )
    with_images = build_judge_prompt(ctx, use_images=True, max_screenshots=2, max_actions=3)
    assert with_images.images == (png(2), png(3))
    assert "tap(8)" in with_images.user_text and "tap(5)" not in with_images.user_text
    assert "xxxx" not in with_images.user_text  # the screenshots stand in for the screen

    text_only = build_judge_prompt(ctx, use_images=False, ui_text_max_chars=10)
    assert text_only.images == ()
    assert "x" * 10 + "\n[...]" in text_only.user_text
    assert "x" * 11 not in text_only.user_text
    assert "Search for pizza" in text_only.user_text


def test_judging_a_real_simdroid_episode(server: ChatServer) -> None:
    task = next(task for task in load_tasks(split="test") if task.kind == "set_alarm")
    env = SimDroidEnv(SimDroidEnvConfig(device=SimDroidConfig(distractor_prob=0.0), ui_xml=False))
    judge = make_judge(server, max_screenshots=2)
    observation = env.reset(task, seed=0)
    screens = [observation.screenshot_png]
    while not env.done:
        observation = env.step(expert_action(env, task)).observation
        screens.append(observation.screenshot_png)
    ctx = EpisodeContext(
        task.instruction, task=task, screenshots=screens, actions=env.history, episode_id="e"
    )
    assert judge.evaluate(ctx).verdict is Verdict.SUCCESS
    assert judge.evaluate(ctx).skipped_call

    (request,) = server.requests
    content = request.body["messages"][1]["content"]
    assert task.instruction in content[0]["text"]
    urls = [part["image_url"]["url"] for part in content if part["type"] == "image_url"]
    assert len(urls) == 2
    newest = Image.open(io.BytesIO(base64.b64decode(urls[-1].split(",", 1)[1])))
    scale = env.device.config.screenshot_scale
    assert newest.size == (int(env.device.size[0] * scale), int(env.device.size[1] * scale))
    assert base64.b64decode(urls[-1].split(",", 1)[1]) == screens[-1]
