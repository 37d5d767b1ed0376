"""The screen-only observation end to end with the real OCR model (rapidocr-onnxruntime, installed
by `make pretrained-deps`, which `make test` runs): SimDroid screens read back, episodes solved
from screenshots alone on SimDroid and over the fake ADB server's `screencap` (raw and `-p`), and the
rows they store (observation "screen", element taps as points the learner maps back)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distrl_core.envs.observation import Observation
from distrl_core.envs.protocol import Environment
from distrl_core.envs.screen import find_text
from distrl_core.learner.batch import StepBatch
from distrl_core.policy.types import ActOutput
from simulators.adb.config import AdbEnvConfig
from simulators.adb.env import simdroid_success_check, simdroid_task_loader
from simulators.factory import make_env
from simulators.fake_adb import FakeAdbServer
from simulators.ocr import ocr_missing_reason
from simulators.rollout import RolloutConfig, run_episodes
from simulators.screen_env import ScreenEnv, on_screen
from simulators.sim_env import SimDroidEnvConfig
from simulators.simdroid.device import SimDroid, SimDroidConfig
from simulators.simdroid.expert import expert_action
from simulators.simdroid.render import DEJAVU_SANS
from simulators.simdroid.tasks import get_task, load_tasks
from storage.schema import steps_to_table


def _missing() -> str | None:
    if not Path(DEJAVU_SANS).is_file():
        return f"{DEJAVU_SANS} is not installed (`make system-deps`: apt-get install fonts-dejavu-core)"
    return ocr_missing_reason()


pytestmark = pytest.mark.skipif(_missing() is not None, reason=str(_missing()))


def _first(family: str, split: str, kind: str) -> str:
    return next(t.task_id for t in load_tasks(family, split) if t.kind == kind)


# An app (on the launcher's second page), a setting screens deep, a search typed into a focused
# field, and a shop's product added to the cart.
TASKS = [
    _first("general", "train", "open_app"),
    _first("general", "test", "toggle_setting"),
    _first("general", "train", "web_search"),
    _first("webshop", "test", "shop_add_to_cart"),
]


def _screen_expert(truth: Callable[[Environment], SimDroid]) -> Callable[..., list[ActOutput]]:
    """The scripted expert acting through the OCR's elements only (``on_screen``)."""

    def act(envs: list[Any], observations: list[Observation]) -> list[ActOutput]:
        outputs = []
        for env, observation in zip(envs, observations, strict=True):
            phone = truth(env)
            action = on_screen(expert_action(phone, env.task), phone, observation)
            outputs.append(ActOutput(str(action), action, 0.0, 0, 0.0, 0.0))
        return outputs

    return act


def test_simdroid_screens_are_read_back_by_the_ocr() -> None:
    env = make_env(SimDroidEnvConfig(observation="screen", screenshots=False, seed=3, serial="sim-screen"))
    assert isinstance(env, ScreenEnv)
    observation = env.reset("general-train-0000", seed=1)
    truth = env.device.elements()
    readable = [e for e in truth if e.label and e.class_name.endswith("TextView")]
    assert observation.extras["observation"] == "screen" and observation.ui_xml == ""
    assert observation.screenshot_png is None  # the OCR read it; the config did not ask to keep it
    found = [find_text(observation.elements, e.label) for e in readable]
    assert None not in found, [e.label for e, f in zip(readable, found, strict=True) if f is None]
    for element, index in zip(readable, found, strict=True):
        assert index is not None
        x, y = observation.elements[index].center
        x1, y1, x2, y2 = element.bounds
        assert x1 <= x < x2 and y1 <= y < y2, (element.label, observation.elements[index])


@pytest.mark.slow  # four episodes, every step read by the OCR (~0.65 s of CPU each)
def test_the_expert_solves_tasks_from_screenshots_and_its_rows_train(make_policy) -> None:
    config = RolloutConfig(
        env=SimDroidEnvConfig(observation="screen", screenshots=False, ui_xml=False),
        parallel_envs=len(TASKS),
        seed=5,
    )
    result = run_episodes(_screen_expert(lambda env: env.device), TASKS, config)
    assert [e.success for e in result.episodes] == [True] * len(TASKS), result.episodes
    table = steps_to_table(result.rows)  # the schema takes them
    assert set(table.column("observation").to_pylist()) == {"screen"}
    actions = table.column("action").to_pylist()
    assert any(a.startswith("tap(0.") for a in actions) and not any(
        a in ("tap(0)", "tap(1)") for a in actions
    )
    assert any(a.startswith("type(") for a in actions)
    # The learner scores every stored point tap as the element tap it lands on.
    batch = StepBatch.from_rows(result.rows)
    out = make_policy().evaluate(batch)
    assert bool(out.known[batch.mask].all())


@pytest.mark.slow  # an episode over the fake ADB server, every step read by the OCR
@pytest.mark.parametrize("keep", [False, True], ids=["raw-screencap", "screencap-p"])
def test_one_episode_from_screenshots_over_the_fake_adb_server(
    start_fake_adb: Callable[..., FakeAdbServer], monkeypatch: pytest.MonkeyPatch, keep: bool
) -> None:
    # A 540x1200 phone drawn readable: its screenshot is all the policy's elements come from, raw
    # `screencap` pixels when the shards keep no screenshot, else `screencap -p`'s PNG.
    from simulators.adb.link import AdbDeviceLink

    def unused(self: AdbDeviceLink) -> None:
        raise AssertionError("the other form of screencap was used")

    if keep:
        monkeypatch.setattr(AdbDeviceLink, "screenshot_pixels", unused)
    else:
        monkeypatch.setattr(AdbDeviceLink, "screenshot", unused)
    server = start_fake_adb(devices=1, screen_scale=0.5, simdroid=SimDroidConfig(font=DEJAVU_SANS))
    env = make_env(
        AdbEnvConfig(
            port=server.port,
            serial="emulator-5554",
            observation="screen",
            screenshots=keep,
            settle_delay_s=0.0,
            retry_delay_s=0.0,
            step_timeout_s=10.0,
            task_loader=simdroid_task_loader,
            success_check=simdroid_success_check,
        )
    )
    assert isinstance(env, ScreenEnv) and env.kind == "adb"
    device = server.device("emulator-5554")

    def truth(_: Environment) -> SimDroid:
        return device.phone  # type: ignore[no-any-return]

    def act(envs: list[Any], observations: list[Observation]) -> list[ActOutput]:
        with device.lock:  # the oracle reads the phone; nobody else may change it meanwhile
            return _screen_expert(truth)(envs, observations)

    task = get_task(TASKS[1])  # a setting: the launcher, Settings, its page, the switch
    result = run_episodes(act, [task], RolloutConfig(parallel_envs=1, seed=2), envs=[env])
    (episode,) = result.episodes
    assert episode.success and episode.steps >= 2, result.rows
    rows = result.rows
    assert {r["env_kind"] for r in rows} == {"adb"} and {r["observation"] for r in rows} == {"screen"}
    assert all((r["screenshot_png"] is not None) == keep for r in rows)  # kept only when asked
    assert all("(" in r["observation_text"] for r in rows)  # elements with bounds, read by the OCR
    steps_to_table(rows)


@pytest.mark.slow  # two episodes, every step read by the OCR
def test_the_evaluation_plays_screen_observed_episodes_under_a_protocol_of_its_own() -> None:
    from simulators.evaluation import estimate_success
    from tasks.evaluator import EvaluatorParams

    seen: set[object] = set()
    expert = _screen_expert(lambda env: env.device)

    def act(envs: list[Any], observations: list[Observation]) -> list[ActOutput]:
        seen.update(o.extras.get("observation") for o in observations)
        return expert(envs, observations)

    env = SimDroidEnvConfig(observation="screen", screenshots=False, ui_xml=False)
    tasks = [get_task(TASKS[0]), get_task(TASKS[2])]
    estimate = estimate_success(act, tasks, env, episodes_per_task=1, parallel=2)
    assert (estimate.success, estimate.episodes, seen) == (1.0, 2, {"screen"})
    tree, screen = EvaluatorParams(), EvaluatorParams(observation="screen")
    assert screen.protocol == tree.protocol + ":screen"  # scores pair only with their own kind
    assert screen.evaluation_args()["observation"] == "screen"


def test_a_screen_read_again_comes_from_the_cache_unchanged() -> None:
    from simulators.ocr import OcrConfig, OcrReader

    env = make_env(SimDroidEnvConfig(screenshots=True, device=SimDroidConfig().readable()))
    png = env.reset(TASKS[0], seed=1).screenshot_png
    assert png is not None
    reader, uncached = OcrReader(OcrConfig(cache_screens=1)), OcrReader(OcrConfig(cache_screens=0))
    first = reader.read(png)
    assert reader.read(png) == first == uncached.read(png)
    assert len(reader._cache) == 1 and len(uncached._cache) == 0
    second = env.step("swipe(left)").observation.screenshot_png  # the launcher's second page
    assert second is not None and second != png
    assert reader.read(second) != first
    assert len(reader._cache) == 1  # the oldest reading made way
