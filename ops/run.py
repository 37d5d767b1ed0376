"""`distrl run`: one episode of a policy version on one device, watched as it happens.

The pieces are the collectors': the registry's checked fetch (`storage.registry`), `load_policy`,
`run_episodes` (`simulators.rollout`) on the environment a collector would build, and a shard
written to the store in the pool `run`, so `distrl sql` sees the episode with every other. What is
added: a line per step (the screen, the action with its probability), the verdict (the device's
rules, else the model judge when `DISTRL_JUDGE_BASE_URL` is set), and the storyboard
(`ops.storyboard`).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from distrl_core.envs.actions import Action, format_action
from distrl_core.envs.kinds import EnvKind
from distrl_core.envs.observation import Observation
from distrl_core.envs.protocol import Environment, StepResult, Task
from distrl_core.envs.screen import ObservationKind
from distrl_core.evaluators import EpisodeContext, EvalResult, Verdict
from distrl_core.policy import Policy, load_policy
from distrl_core.policy.types import ActOutput
from ops.cli_errors import UserError
from ops.storyboard import Frame, write_storyboard
from simulators.adb.errors import AdbEnvError
from simulators.adb_checks import STARTER_TASKS, AdbRuleEvaluator
from simulators.factory import make_env
from simulators.rollout import RolloutConfig, RolloutResult, run_episodes
from simulators.screen_env import ScreenEnv
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from simulators.sim_rules import SimStateEvaluator
from simulators.simdroid.free_task import FREE_TEMPLATE, KINDS, free_task, instruction_task
from simulators.simdroid.free_text import NotParsed
from simulators.simdroid.success import UNRECOGNISED_KIND
from simulators.simdroid.tasks import get_task, load_tasks
from storage.registry import PolicyRegistry
from storage.schema import steps_to_table
from storage.shards import ShardWriter, ShardWriterConfig
from storage.store import open_store
from tasks.collector_envs import adb_env_config

__all__ = ["POOL", "RunRequest", "run_policy", "screen_summary"]

POOL = "run"  # the store's pool of the episodes `distrl run` plays


@dataclass(frozen=True)
class RunRequest:
    """What to run, and where.

    - ``instruction``/``task_id``: the task: a SimDroid task id, or an instruction (a SimDroid
      task's own words; with ``sim`` any text, read as a task where it can be; on a real device
      any instruction).
    - ``policy``: a registry alias or version number (``champion``, ``latest``, ``7``).
    - ``sim``: a SimDroid in this process; else ``serial`` behind the adb server at
      ``adb_host:adb_port`` (``fake_adb``: the server is `distrl fake-adb`).
    - ``max_steps``: the episode's step limit (None: the task's horizon).
    - ``greedy``: the most likely action at each step (else sampled, as collectors act).
    - ``out``: the folder the episode's screenshots and storyboard go under.
    - ``store``: the trajectory store (None: ``DISTRL_STORE_URI``).
    - ``observation``: "tree" (the UI dump's elements) or "screen" (an OCR of the screenshot).
    """

    instruction: str | None = None
    task_id: str | None = None
    policy: str = "champion"
    sim: bool = False
    serial: str | None = None
    adb_host: str = "127.0.0.1"
    adb_port: int = 5037
    fake_adb: bool = False
    max_steps: int | None = None
    greedy: bool = True
    seed: int = 0
    out: Path = Path(".distrl/runs")
    store: str | None = None
    observation: ObservationKind = "tree"


@dataclass(frozen=True)
class RunOutcome:
    episode_id: str
    steps: int
    verdict: EvalResult
    storyboard: Path
    error: str | None  # the device stopped answering: what it said


def screen_summary(observation: Observation, labels: int = 4) -> str:
    """A screen in one line: the app in front and the first labels on it."""
    shown = [f'"{e.label}"' for e in observation.elements if e.label][:labels]
    more = " …" if len(observation.elements) > labels else ""
    app = observation.activity.rpartition("/")[0] or observation.activity or "screen"
    return f"{app}: {', '.join(shown) or '(no labels)'}{more} ({len(observation.elements)} elements)"


class _Watched:
    """The environment as `run_episodes` drives it, reporting each step's outcome and keeping the
    screen the episode ends on (the rollout hands back rows, not the last observation)."""

    kind: ClassVar[EnvKind]

    def __init__(self, env: Environment, frames: list[Frame]) -> None:
        self.env, self.frames = env, frames
        self.kind = env.kind  # type: ignore[misc]  # the wrapped environment's kind
        self.last: Observation | None = None

    task = property(lambda self: self.env.task)
    history = property(lambda self: self.env.history)
    done = property(lambda self: self.env.done)
    serial = property(lambda self: self.env.serial)

    def reset(self, task: Task | str, seed: int | None = None) -> Observation:
        self.last = self.env.reset(task, seed=seed)
        return self.last

    def step(self, action: Action | str) -> StepResult:
        result = self.env.step(action)
        self.last = result.observation
        if result.info.invalid and self.frames:
            self.frames[-1] = dataclasses.replace(
                self.frames[-1], note=f"invalid: {result.info.invalid_reason}"
            )
        return result

    def close(self) -> None:
        self.env.close()


def _acting(policy: Policy, greedy: bool, frames: list[Frame], report: Callable[[str], None]):
    """`run_episodes`' actor: the policy, and a line per step as it is chosen."""

    def act(_envs: list[Any], observations: list[Observation]) -> list[ActOutput]:
        outputs = policy.act(observations, greedy=greedy)
        for observation, output in zip(observations, outputs, strict=True):
            frame = Frame(
                step=observation.step + 1,
                screen=screen_summary(observation),
                screenshot=observation.screenshot_png,
                action=format_action(output.action),
                choice=str(output.extras.get("candidate_text", "")),
                probability=math.exp(output.logprob),
            )
            frames.append(frame)
            report(f"step {frame.step:>2}  {frame.screen}\n         → {frame.caption}")
        return outputs

    return act


def _task(request: RunRequest) -> Task:
    if request.task_id:
        try:
            task = get_task(request.task_id)
        except KeyError as exc:
            raise UserError(f"--task: {exc.args[0]}") from None
    elif not request.instruction:
        raise UserError('no instruction: give one (distrl run "Turn on Wi-Fi" --sim) or --task TASK_ID')
    else:
        wanted = " ".join(request.instruction.split()).casefold()
        known = [t for t in load_tasks() if t.instruction.casefold() == wanted]
        if known:
            task = known[0]
        elif request.fake_adb:  # the fake server sets up and checks SimDroid's own tasks, by id
            close = difflib.get_close_matches(request.instruction, [t.instruction for t in load_tasks()], 1)
            hint = f" (closest: {close[0]!r})" if close else ""
            raise UserError(
                f"SimDroid has no task {request.instruction!r}{hint}; behind --fake-adb give one of its "
                "instructions or --task TASK_ID (ids like general-test-0003); --sim plays any text"
            )
        elif request.sim:  # read on the fly into a task the rules judge, else played as words only
            found = free_task(request.instruction)
            task = (
                instruction_task(request.instruction, found.reason) if isinstance(found, NotParsed) else found
            )
        else:  # a real device: any instruction; rules or a judge give the verdict
            task = instruction_task(request.instruction)
    return task if request.max_steps is None else dataclasses.replace(task, horizon=request.max_steps)


def _reading(task: Task) -> str | None:
    """How a typed instruction was read, in a line (None for a generated task or on a device)."""
    if task.params.get("template") == FREE_TEMPLATE:
        named = ", ".join(f"{name}={task.params[name]}" for name in KINDS[task.kind])
        return f"read as {task.kind} ({named}): the rules give the verdict"
    if task.kind == UNRECOGNISED_KIND and task.params.get("unrecognised"):
        return f"not read as a SimDroid task: {task.params['unrecognised']}"
    return None


def _environment(request: RunRequest) -> Environment:
    if request.sim:
        return make_env(
            SimDroidEnvConfig(
                screenshots=True,
                ui_xml=False,
                seed=request.seed,
                serial="sim-run",
                observation=request.observation,
            )
        )
    if not request.serial:
        raise UserError(
            "no device: pass --device SERIAL (a serial `adb devices` lists; --fake-adb for `distrl fake-adb`) "
            "or --sim for a SimDroid"
        )
    config = adb_env_config(
        request.adb_host,
        request.adb_port,
        request.serial,
        fake_server=request.fake_adb,
        screenshots=True,
        observation=request.observation,
    )
    env = make_env(config)
    try:
        env.link.connect()  # type: ignore[attr-defined]  # an AdbEnv: a missing device is said before the run
    except AdbEnvError as exc:
        raise UserError(f"--device {request.serial}: {exc}") from None
    return env


def _policy(registry: PolicyRegistry, ref: str) -> tuple[int, Policy]:
    if ref.isdigit() and int(ref) not in (versions := registry.versions()):
        have = f"versions {versions[0]}-{versions[-1]}" if versions else "no versions yet"
        raise UserError(f"--version {ref}: '{registry.name}' has no version {ref} ({have})")
    try:
        fetched = registry.fetch(ref)
    except LookupError as exc:
        raise UserError(f"--policy {ref}: {exc}") from None
    return fetched.version, load_policy(fetched.path).eval()


def _verdict(request: RunRequest, task: Task, watched: _Watched, result: RolloutResult) -> EvalResult:
    """The device's own check where it has one; else the model judge, if one is configured."""
    episode, env = result.episodes[0], watched.env
    if isinstance(env, ScreenEnv):  # --observation screen: the device's own checks are underneath
        env = env.env
    if isinstance(env, SimDroidEnv):
        found = SimStateEvaluator(env.device).evaluate(EpisodeContext(task.instruction, task=task))
        return _judge(task, watched, found) if task.kind == UNRECOGNISED_KIND else found
    if request.fake_adb:
        verdict = Verdict.SUCCESS if episode.success else Verdict.FAILURE
        return EvalResult(verdict, f"simdroid is-successful {task.task_id}", "fake_adb")
    rules_task = next(
        (t for t in STARTER_TASKS if t.instruction.casefold() == task.instruction.casefold()), task
    )
    device = getattr(getattr(env, "link", None), "device", None)
    found = AdbRuleEvaluator().evaluate(EpisodeContext(task.instruction, task=rules_task, device=device))
    return found if found.verdict is not Verdict.UNKNOWN else _judge(task, watched, found)


def _judge(task: Task, env: _Watched, rules: EvalResult) -> EvalResult:
    import os

    from distrl_core.evaluators import ModelJudge
    from distrl_core.evaluators.judge_http import ENV_BASE_URL, HttpJudgeBackend, HttpJudgeConfig

    if not os.environ.get(ENV_BASE_URL):
        return dataclasses.replace(
            rules, reason=f"{rules.reason}; set {ENV_BASE_URL} and DISTRL_JUDGE_MODEL for a model judge"
        )
    last: Observation | None = env.last
    context = EpisodeContext(
        task.instruction,
        task=task,
        screenshots=[last.screenshot_png] if last is not None and last.screenshot_png else [],
        actions=list(env.history),
        ui_text=last.ui_text if last is not None else None,
    )
    with HttpJudgeBackend(HttpJudgeConfig.from_env()) as backend:
        return ModelJudge(backend).evaluate(context)


def _store(
    request: RunRequest, rows: Sequence[dict[str, Any]], collector_id: str, verdict: EvalResult
) -> None:
    """The episode as collectors write it; a success the judge saw (the device could not tell) is
    recorded as the reward, as DigiRL scores real-device episodes."""
    rows = [dict(row) for row in rows]
    if verdict.success and rows and not rows[-1]["episode_success"] and rows[-1]["episode_status"] == "ok":
        for row in rows:
            row["episode_success"] = True
        rows[-1]["reward"] = 1.0
    config = ShardWriterConfig(pool=POOL, collector_id=collector_id, flush_seconds=0)
    writer = ShardWriter(open_store(request.store), config)
    writer.add_episode(steps_to_table(rows))
    writer.close()


def run_policy(request: RunRequest, report: Callable[[str], None] = print) -> RunOutcome:
    """Play one episode of `request.policy` on the device; `report` gets each line as it happens."""
    task = _task(request)
    registry = PolicyRegistry()
    version, policy = _policy(registry, request.policy)
    frames: list[Frame] = []
    env = _Watched(_environment(request), frames)
    device = env.serial or "device"
    report(
        f"{registry.name} v{version} on {device}: {task.instruction!r} ({task.task_id}, ≤{task.horizon} steps)"
    )
    if (reading := _reading(task)) is not None:
        report(reading)
    collector_id = "run_" + "".join(c if c.isalnum() or c in "_." else "_" for c in device)
    config = RolloutConfig(
        parallel_envs=1, seed=request.seed, run_id=f"run-{uuid.uuid4().hex[:10]}", pool=POOL,
        collector_id=collector_id, policy_name=registry.name, policy_version=version, max_reset_failures=1,
    )  # fmt: skip
    try:
        result = run_episodes(_acting(policy, request.greedy, frames, report), [task], config, envs=[env])
    finally:
        env.close()
    episode = result.episodes[0]
    if episode.error is None:
        verdict = _verdict(request, task, env, result)
    else:
        verdict = EvalResult(Verdict.UNKNOWN, f"the device stopped answering: {episode.error}", "run")
    report(f"verdict: {verdict.verdict.value} ({verdict.source}: {verdict.reason})")
    _store(request, result.rows, collector_id, verdict)
    last = env.last if episode.error is None else None
    frames.append(
        Frame(len(frames) + 1, screen_summary(last) if last else "", last.screenshot_png if last else None,
              note=f"{verdict.verdict.value}: {verdict.reason}")
    )  # fmt: skip
    title = f"{task.instruction} — {registry.name} v{version} on {device}"
    page = write_storyboard(
        request.out / episode.episode_id[:12], title, f"episode {episode.episode_id}", frames
    )
    return RunOutcome(episode.episode_id, episode.steps, verdict, page, episode.error)
