"""The demo profile's thread sampler: groups by role, CPU per group, the learner found by its flow."""

from __future__ import annotations

import threading
import time

from bench.demo_profile import LEARN_FLOW, profile_table, rl_group
from bench.stack_sampler import StackSampler, thread_cpu_s


def test_threads_are_grouped_by_role_and_the_rest_left_out():
    assert rl_group("MainThread", {LEARN_FLOW, "tasks/learner.py:train_block"}) == "learner"
    assert rl_group("collector-3", {"flows/collect.py:collect"}) == "collectors"
    assert rl_group("replay-prefetch_0", set()) == "replay-prefetch"
    assert rl_group("replay-ingest_0", set()) == "replay-ingest"
    # the warm start runs in the main thread before the learner's flow exists: not counted
    assert rl_group("MainThread", {"simulators/warm_start.py:supervised_warm_start"}) is None


def _spin_until_cpu(seconds: float, done: threading.Event, release: threading.Event) -> None:
    while time.thread_time() < seconds:
        sum(i * i for i in range(1000))
    done.set()
    release.wait(10)  # stays alive until the sampler has stopped, for its last CPU reading


def _idle_wait(release: threading.Event) -> None:
    release.wait(10)


def test_the_sampler_counts_a_busy_threads_cpu_and_an_idle_threads_stack():
    done, release = threading.Event(), threading.Event()

    def group_of(name: str, stack: set[str]) -> str | None:
        return name if name in ("busy", "idle") else None

    sampler = StackSampler(0.01, group_of=group_of).start()
    busy = threading.Thread(target=_spin_until_cpu, args=(0.3, done, release), name="busy")
    idle = threading.Thread(target=_idle_wait, args=(release,), name="idle")
    busy.start()
    idle.start()
    assert done.wait(60)
    sampler.stop()
    release.set()
    busy.join()
    idle.join()

    summary = sampler.summary(groups=("busy", "idle"))
    assert set(sampler.samples) == {"busy", "idle"}  # the main thread and the rest left out
    assert summary["busy"]["cpu_s"] >= 0.15  # most of its 0.3 s, counted from its first sample
    assert summary["idle"]["cpu_s"] < 0.05
    idle_stack = summary["idle"]["inclusive"]
    assert any(key.endswith(":_idle_wait") and share == 1.0 for key, share in idle_stack.items())


def test_a_thread_that_is_gone_has_no_cpu_reading():
    assert thread_cpu_s(threading.get_native_id()) is not None
    assert thread_cpu_s(2**22 + 12345) is None


def test_the_table_relates_cpu_to_the_wall_clock_sampled():
    inclusive = {"prefect/flow_engine.py:run_flow": 1.0, "a": 1.0, "b": 0.5}
    group = {"thread_samples": 200, "cpu_s": 5.0, "inclusive": inclusive, "exclusive": {"b": 0.5}}
    empty = {"thread_samples": 0, "cpu_s": 0.0, "inclusive": {}, "exclusive": {}}
    profile = {"interval_s": 0.05, "learner": group} | {
        g: empty for g in ("collectors", "replay-prefetch", "replay-ingest")
    }
    table = profile_table(profile)
    assert table["learner"]["thread_seconds_sampled"] == 10.0
    assert table["learner"]["cpu_per_wall"] == 0.5
    assert table["collectors"]["cpu_per_wall"] is None
    assert table["learner"]["inclusive_top"] == {"a": 1.0, "b": 0.5}  # Prefect's engine left out
