"""Process handling of `distrl up`: no leftovers, and never a stranger's process (fast; real processes)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import psutil
import pytest

from flows.child_process import lower_thread_priority
from ops import processes
from ops.up import STATE_FILE, Stack, UpConfig, down, work_pools
from tests.integration.conftest import REPO

# A child that starts a grandchild in a new session, as Prefect's process worker does with flow runs.
SPAWNER = (
    "import subprocess, sys, time\n"
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True)\n"
    "print(p.pid, flush=True)\n"
    "time.sleep(600)\n"
)


def _grandchild_pid(proc: processes.Managed) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = proc.log_path.read_text().strip()
        if text:
            return int(text.splitlines()[0])
        time.sleep(0.1)
    raise AssertionError(f"the spawner printed nothing: {proc.tail()}")


def test_stop_tree_ends_descendants_in_other_sessions(tmp_path: Path) -> None:
    proc = processes.start("spawner", [sys.executable, "-c", SPAWNER], env={}, log_path=tmp_path / "s.log")
    grandchild = _grandchild_pid(proc)
    assert psutil.Process(grandchild).is_running()
    processes.stop_tree([proc.pid], grace_s=5)
    proc.popen.wait(timeout=5)
    assert not psutil.pid_exists(grandchild) or psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE


def test_down_stops_recorded_processes_but_not_a_reused_pid(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "import time; time.sleep(600)"]
    ours = processes.start("ours", argv, env={}, log_path=tmp_path / "ours.log")
    stranger = processes.start("stranger", [*argv, "x"], env={}, log_path=tmp_path / "other.log")
    try:
        state = {
            "processes": [
                {"name": "ours", "pid": ours.pid, "argv": argv},
                # The pid of a process that now runs something else: must be left alone.
                {"name": "reused", "pid": stranger.pid, "argv": argv},
            ]
        }
        (tmp_path / STATE_FILE).write_text(json.dumps(state))
        assert down(tmp_path, dry_run=True) == ["ours"]
        assert down(tmp_path) == ["ours"]
        ours.popen.wait(timeout=15)
        assert stranger.alive()
        assert json.loads((tmp_path / STATE_FILE).read_text())["processes"] == []
    finally:
        processes.stop_tree([ours.pid, stranger.pid], grace_s=2)


def test_stack_refuses_a_running_or_foreign_folder(tmp_path: Path) -> None:
    assert work_pools(REPO) == ["collectors-a", "collectors-b", "learner-gpu", "evaluation", "evaluator"]
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(RuntimeError, match="not a `distrl up` folder"):
        Stack(UpConfig(run_dir=foreign, project_dir=REPO)).start()
    assert (foreign / "notes.txt").exists()

    argv = [sys.executable, "-c", "import time; time.sleep(600)"]
    running = processes.start("server", argv, env={}, log_path=tmp_path / "r.log")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / STATE_FILE).write_text(
        json.dumps({"processes": [{"name": "s3", "pid": running.pid, "argv": argv}]})
    )
    try:
        with pytest.raises(RuntimeError, match="already running"):
            Stack(UpConfig(run_dir=busy, project_dir=REPO)).start()
        # The refused stack must not forget the running one's state (`distrl up --down` needs it).
        assert (busy / STATE_FILE).exists() and running.alive()
    finally:
        processes.stop_tree([running.pid], grace_s=2)


# A parent that starts one sleeping child through `processes.start`, prints its pid and exits.
PARENT = (
    "import sys\n"
    "from pathlib import Path\n"
    "from ops import processes\n"
    "proc = processes.start('sleeper', [sys.executable, '-c', 'import time; time.sleep(600)'], env={},\n"
    "    log_path=Path(sys.argv[1]), outlive_parent=sys.argv[2] == 'detach')\n"
    "print(proc.popen.pid, flush=True)\n"
)


@pytest.mark.parametrize("mode", ["attached", "detach"])
def test_children_die_with_the_command_unless_it_detaches(tmp_path: Path, mode: str) -> None:
    """`distrl up --detach` leaves its servers running after it exits; otherwise they stop with it."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", PARENT, str(tmp_path / "child.log"), mode],
        capture_output=True, text=True, cwd=REPO, timeout=60, check=True,
    )  # fmt: skip
    child = psutil.Process(int(done.stdout.split()[-1]))
    try:
        if mode == "detach":
            time.sleep(1.0)  # the kernel's signal to an attached child comes at once
            assert child.is_running() and child.status() != psutil.STATUS_ZOMBIE
        else:
            child.wait(timeout=30)  # ends: raises TimeoutExpired if it outlived its parent
    finally:
        if child.is_running():
            child.kill()


def test_the_embedded_evaluator_thread_runs_nicer_than_the_rest(tmp_path: Path) -> None:
    """train_local's evaluator thread lowers its own CPU priority only (Linux threads)."""
    import os
    import threading

    if not hasattr(os, "getpriority"):
        pytest.skip("no per-thread priorities on this platform")
    seen: dict[str, int] = {}

    def evaluator_thread() -> None:
        lower_thread_priority(19)
        seen["evaluator"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    thread = threading.Thread(target=evaluator_thread)
    thread.start()
    thread.join()
    assert seen["evaluator"] == 19 > before or before == 19
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before  # this thread untouched
