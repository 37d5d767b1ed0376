"""Faulty devices at 5 % and a device stuck rebooting, through the collector's write path: the
batches survive, every attempted episode reaches the store, no shard is corrupt, no thread leaks.
The same scenarios run at benchmark counts in ``bench/faults_env.py``."""

from __future__ import annotations

from bench.faults_env import faulty_devices, reset_outage


def test_faulty_devices_at_5_percent_lose_nothing_and_crash_no_batch() -> None:
    details: dict[str, int] = {}
    row = faulty_devices(episodes=48, fault_prob=0.05, seed=3, details=details)
    assert row["attempts"] >= 40  # a batch whose devices were all taken out leaves tasks untried
    assert (row["corrupt"], row["lost"], row["crashed"], row["leaked"]) == (0, 0, 0, 0), row
    # The faults did happen: devices failed episodes and the policy emitted unparseable text.
    assert details["env_error_episodes"] > 0 and details["invalid_steps"] > 0, details


def test_a_device_stuck_rebooting_is_taken_out_and_its_attempts_are_stored() -> None:
    details: dict[str, int] = {}
    row = reset_outage(episodes=24, seed=1, details=details)
    assert (row["corrupt"], row["lost"], row["crashed"], row["leaked"]) == (0, 0, 0, 0), row
    assert details["env_error_episodes"] >= 3  # at most max_reset_failures per batch, all stored
