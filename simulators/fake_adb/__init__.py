"""A fake ADB server that serves SimDroid phones over the real ADB wire protocol.

Start one with ``run_fake_adb(port, devices)`` (blocking) or ``FakeAdbServer(FakeAdbConfig(...))`` (in
threads, for tests). Besides Android's usual shell commands the devices understand one fake-only
command, ``simdroid load-task <task_id>``, which puts a phone into a SimDroid task's start state, and
``simdroid is-successful <task_id>``, which prints ``true`` or ``false``.
"""

from simulators.fake_adb.server import FakeAdbConfig, FakeAdbServer, run_fake_adb

__all__ = ["FakeAdbConfig", "FakeAdbServer", "run_fake_adb"]
