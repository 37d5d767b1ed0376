"""`distrl run`: one episode of a published version on a SimDroid or a device behind the fake ADB
server, printed step by step, stored in the pool `run` (what `distrl sql` reads back), drawn as
a storyboard; and the one-line errors for no device, no version, a device that stops answering."""

from __future__ import annotations

import json
import math
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from ops.cli import main as cli

TASK = "general-train-0000"
SERIAL = "emulator-5554"
_STEP = re.compile(r"^step +(\d+) +.+\n +→ (\S+).* p=([0-9.]+)", re.MULTILINE)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, tokenizer) -> Iterator[Path]:
    """An embedded home whose registry holds one tiny policy version, the champion."""
    from distrl_core.policy import Policy, PolicyConfig, save_policy
    from storage.registry import PolicyRegistry

    root = tmp_path_factory.mktemp("run-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DISTRL_STORE_URI", str(root / "store"))
        patch.setenv("DISTRL_MLFLOW_TRACKING_URI", f"sqlite:///{root / 'mlflow.db'}")
        patch.setenv("DISTRL_MLFLOW_CACHE_DIR", str(root / "policy-cache"))
        patch.setenv("ADBUTILS_ADB_PATH", "/bin/false")  # a missing adb server fails, no daemon starts
        registry = PolicyRegistry()
        saved = save_policy(Policy.create(PolicyConfig(device="cpu"), tokenizer=tokenizer), root / "v1")
        registry.set_alias("champion", registry.publish(saved, run_id=registry.start_run("learner")))
        yield root


def _stored(root: Path, episode_id: str) -> tuple[dict, list[dict]]:
    """The episode and its steps as `distrl sql` sees them."""
    from storage.sql_views import open_sql
    from storage.store import open_store

    session = open_sql(open_store(str(root / "store")))
    try:
        where = f"WHERE episode_id = '{episode_id}'"
        (episode,) = session.query(f"SELECT * FROM episodes {where}").to_pylist()
        steps = session.query(f"SELECT step, action, behaviour_logprob FROM steps {where} ORDER BY step")
    finally:
        session.close()
    return episode, steps.to_pylist()


def test_run_on_simdroid_prints_each_step_stores_the_episode_and_draws_it(
    home: Path, tmp_path, capsys
) -> None:
    from simulators.simdroid.tasks import get_task

    instruction = get_task(TASK).instruction  # a SimDroid task's own words find the task
    code = cli(["run", instruction, "--sim", "--home", str(home), "--max-steps", "3", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"({TASK}, ≤3 steps)" in out
    printed = [(int(n), action, float(p)) for n, action, p in _STEP.findall(out)]
    episode_id = re.search(r"episode_id = '([0-9a-f]+)'", out).group(1)
    episode, steps = _stored(home, episode_id)
    # What was printed is what was stored: each action, its probability, in order.
    assert [n for n, _, _ in printed] == list(range(1, len(steps) + 1)) and 1 <= len(steps) <= 3
    assert [a for _, a, _ in printed] == [s["action"] for s in steps]
    for (_, _, p), step in zip(printed, steps, strict=True):
        assert p == pytest.approx(math.exp(step["behaviour_logprob"]), abs=0.006)
    assert (episode["pool"], episode["task_id"], episode["policy_version"]) == ("run", TASK, 1)
    verdict = re.search(r"^verdict: (\w+) \(sim_rules", out, re.MULTILINE).group(1)
    assert verdict == ("success" if episode["success"] else "failure")
    # The storyboard: a screenshot per step and of the last screen, beside and inside the page.
    page = Path(re.search(r"^storyboard: (.+)$", out, re.MULTILINE).group(1))
    assert page.parent.parent == tmp_path
    pngs = sorted(page.parent.glob("step-*.png"))
    assert len(pngs) == len(steps) + 1 and all(p.read_bytes()[:4] == b"\x89PNG" for p in pngs)
    html = page.read_text()
    assert html.count("data:image/png;base64,") == len(steps) + 1
    assert f"{verdict}: " in html and steps[0]["action"] in html


def _verdict_line(out: str) -> str:
    (line,) = [line for line in out.splitlines() if line.startswith("verdict: ")]
    return line


def test_a_typed_instruction_is_read_as_a_task_and_the_rules_judge_it(home: Path, tmp_path, capsys) -> None:
    """Words no generated task has, read on the fly into the task they ask for: the rules' verdict
    is the stored outcome, and the episode was played on that task's start state."""
    from simulators.simdroid.free_task import free_task

    text = "Could you bring up the gallery of pictures"
    code = cli(["run", text, "--sim", "--home", str(home), "--max-steps", "2", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    task_id = free_task(text).task_id
    assert f"({task_id}, ≤2 steps)" in out and task_id.startswith("general-free-")
    assert "read as open_app (app=Photos): the rules give the verdict" in out
    verdict = re.match(
        r"verdict: (\w+) \(sim_rules: open_app check (?:passed|failed) for (\S+)\)$", _verdict_line(out)
    )
    assert verdict is not None and verdict.group(2) == task_id, out
    episode_id = re.search(r"episode_id = '([0-9a-f]+)'", out).group(1)
    episode, steps = _stored(home, episode_id)
    assert episode["task_id"] == task_id and 1 <= len(steps) <= 2
    assert verdict.group(1) == ("success" if episode["success"] else "failure")


def test_text_no_rule_reads_still_plays_and_says_no_verdict_is_possible(
    home: Path, tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.delenv("DISTRL_JUDGE_BASE_URL", raising=False)
    code = cli(
        [
            "run",
            "Make me a sandwich",
            "--sim",
            "--home",
            str(home),
            "--max-steps",
            "2",
            "--out",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert len(_STEP.findall(out)) == 2  # played to its step limit: nothing can end it as done
    assert "not read as a SimDroid task: I recognise no SimDroid task in it" in out
    line = _verdict_line(out)
    assert line.startswith(
        "verdict: unknown (sim_rules: no verdict possible for this text: I recognise no SimDroid"
    )
    assert line.endswith("; set DISTRL_JUDGE_BASE_URL and DISTRL_JUDGE_MODEL for a model judge)")
    episode_id = re.search(r"episode_id = '([0-9a-f]+)'", out).group(1)
    episode, steps = _stored(home, episode_id)
    assert episode["task_id"].startswith("instruction-") and episode["success"] == 0 and len(steps) == 2


def test_on_simdroid_the_judge_gives_the_verdict_for_text_no_rule_reads(
    home: Path, tmp_path, monkeypatch
) -> None:
    from ops.run import RunRequest, run_policy
    from tests.evaluators.chat_server import ChatServer

    with ChatServer(default_content="Status: success") as judge:
        monkeypatch.setenv("DISTRL_JUDGE_BASE_URL", judge.base_url)
        monkeypatch.setenv("DISTRL_JUDGE_MODEL", "loopback-judge")
        request = RunRequest(instruction="Order me a pizza", sim=True, max_steps=2, out=tmp_path)
        outcome = run_policy(request, report=print)
    assert outcome.verdict.success and outcome.verdict.source.startswith("judge:")
    (asked,) = judge.requests
    assert "Order me a pizza" in json.dumps(asked.body)
    episode, _ = _stored(home, outcome.episode_id)
    assert (episode["success"], episode["return"]) == (1, 1.0)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["Turn on Wi-Fi"], "no device: pass --device SERIAL"),
        (
            ["Make me a sandwich", "--fake-adb", "--device", SERIAL],
            "SimDroid has no task 'Make me a sandwich'",
        ),
        (["--task", "general-train-9999", "--sim"], "no SimDroid task 'general-train-9999'"),
        (["--task", TASK, "--sim", "--version", "9"], "has no version 9 (versions 1-1)"),
        (["--task", TASK, "--sim", "--policy", "staging"], "--policy staging: no version of 'distrl-policy'"),
        (
            ["Turn on Wi-Fi", "--device", SERIAL, "--adb-port", "PORT"],
            f"--device {SERIAL}: cannot reach the adb",
        ),
    ],
)
def test_mistakes_are_one_line_errors_and_store_nothing(home: Path, arguments, message, capsys) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        free = str(sock.getsockname()[1])
    code = cli(["run", *[free if a == "PORT" else a for a in arguments], "--home", str(home)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("error: ") and message in err[-1], err


@pytest.fixture
def fake_adb(tmp_path: Path) -> Iterator:
    from simulators.fake_adb import FakeAdbConfig, FakeAdbServer

    token = tmp_path / "console-token"
    token.write_text("token\n")
    server = FakeAdbServer(FakeAdbConfig(devices=1, screen_scale=0.25, console_auth_token_path=token)).start()
    yield server
    server.stop()


def _request(server, tmp_path: Path, **overrides):
    from ops.run import RunRequest

    settings = {"task_id": TASK, "fake_adb": True, "max_steps": 3} | overrides
    return RunRequest(serial=SERIAL, adb_port=server.port, out=tmp_path, **settings)


def test_run_on_a_device_behind_the_fake_adb_server(home: Path, fake_adb, tmp_path: Path) -> None:
    from ops.run import run_policy

    lines: list[str] = []
    outcome = run_policy(_request(fake_adb, tmp_path), report=lines.append)
    assert outcome.error is None and outcome.verdict.source == "fake_adb"
    episode, steps = _stored(home, outcome.episode_id)
    assert (episode["device_id"], episode["env_kind"], episode["status"]) == (SERIAL, "adb", "ok")
    assert episode["success"] == int(outcome.verdict.success) and len(steps) == outcome.steps
    assert sum(line.startswith("step ") for line in lines) == outcome.steps
    assert len(list(outcome.storyboard.parent.glob("step-*.png"))) == outcome.steps + 1


def test_a_device_that_stops_answering_ends_the_run_with_what_it_did(home: Path, fake_adb, tmp_path) -> None:
    from ops.run import run_policy

    def report(line: str) -> None:
        if line.startswith("step  2"):
            fake_adb.stop()  # the device goes away while the second action is chosen

    outcome = run_policy(_request(fake_adb, tmp_path), report=report)
    assert outcome.error is not None and outcome.steps == 1
    assert outcome.verdict.verdict.value == "unknown" and "stopped answering" in outcome.verdict.reason
    episode, steps = _stored(home, outcome.episode_id)
    assert episode["status"] == "env_error" and len(steps) == 1 and episode["success"] == 0


def test_on_a_real_device_without_rules_the_judge_gives_the_verdict(
    home: Path, fake_adb, tmp_path, monkeypatch
) -> None:
    """A free instruction on a device driven as a real one (reset to HOME, rule checks): no rule
    can tell, so the model judge is asked about the last screen, and its verdict is the reward."""
    from ops.run import run_policy
    from tests.evaluators.chat_server import ChatServer

    with ChatServer(default_content="Status: success") as judge:
        monkeypatch.setenv("DISTRL_JUDGE_BASE_URL", judge.base_url)
        monkeypatch.setenv("DISTRL_JUDGE_MODEL", "loopback-judge")
        what = {"task_id": None, "instruction": "Show me the weather", "fake_adb": False, "max_steps": 2}
        outcome = run_policy(_request(fake_adb, tmp_path, **what), report=print)
    assert outcome.error is None and outcome.verdict.success and outcome.verdict.source.startswith("judge:")
    (asked,) = judge.requests
    assert "Show me the weather" in json.dumps(asked.body) and "image_url" in json.dumps(asked.body)
    episode, steps = _stored(home, outcome.episode_id)
    assert len(steps) == outcome.steps and (episode["success"], episode["return"]) == (1, 1.0)
    assert episode["task_id"].startswith("instruction-")
