"""Fault scenarios of the environment side, at benchmark counts: faulty devices, reset outages,
hostile ADB clients, hostile model output. ``python -m bench.faults_env [--small]`` prints one JSON
table; ``SCENARIOS`` is what the repository-wide fault bench merges into its own table.

Every scenario returns ``{scenario, attempts, corrupt, lost, crashed, leaked}``:

- ``attempts``: episodes (or connections, or inputs) tried; tasks left when every environment of a
  batch had been taken out are not tried;
- ``corrupt``: shards that do not read back, or actions whose text cannot be stored;
- ``lost``: attempted episodes missing from the store, or connections the server never closed;
- ``crashed``: exceptions that escaped to the caller (a collector batch that failed);
- ``leaked``: threads still alive afterwards beyond those that were there before.

The devices' faults are SimDroid's own seeded fault model (``simulators.simdroid.faults``);
episodes go through the collector's write path (``steps_to_table`` -> ``ShardWriter``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import random
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from distrl_core.envs.actions import parse_action
from distrl_core.envs.actions_autoui import parse_autoui_action
from distrl_core.policy.types import ActOutput
from simulators.rollout import RolloutConfig, expert_actor, run_episodes
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from simulators.simdroid.device import SimDroidConfig
from simulators.simdroid.faults import FaultConfig
from simulators.simdroid.tasks import load_tasks

BATCH = 8  # episodes per collector batch, as CollectorParams.episodes_per_batch
ENVS = 4

# Model outputs that once broke something: a lone surrogate, runaway text, backtracking bait.
HOSTILE_OUTPUTS = (
    'type("\\ud83d")',
    'type("\ud83d")',
    "type(" + '"\\' * 3000,
    'type("' + "a" * 1500 + '")',
    'Action Decision: "action_type": "DUAL_POINT", "touch_point": "[' + " " * 3000,
    '"touch_point": "[' * 400,
    'Action Decision: "action_type": "TYPE", "typed_text": "\ud83d", "touch_point": "[-1.0, -1.0]"',
)


def row(
    scenario: str, attempts: int, corrupt=0, lost=0, crashed=0, leaked=0, detail: str = ""
) -> dict[str, Any]:
    """One row of the fault table (bench/faults.py prints these and its own in one table)."""
    return {
        "scenario": scenario,
        "attempts": attempts,
        "corrupt": corrupt,
        "lost": lost,
        "crashed": crashed,
        "leaked": leaked,
        "detail": detail,
    }


def _settle_threads(baseline: int, limit_s: float = 10.0) -> int:
    """Threads above ``baseline`` once short-lived ones had time to end."""
    deadline = time.monotonic() + limit_s
    while threading.active_count() > baseline and time.monotonic() < deadline:
        time.sleep(0.05)
    return max(0, threading.active_count() - baseline)


def _hostile_actor(fault_prob: float, seed: int) -> Callable[[list[Any], list[Any]], list[ActOutput]]:
    """The scripted expert, except that with ``fault_prob`` an output is one of HOSTILE_OUTPUTS."""
    expert, rng = expert_actor(0.1, seed), random.Random(f"{seed}/hostile")

    def act(envs: list[Any], observations: list[Any]) -> list[ActOutput]:
        outputs = expert(envs, observations)
        for i in range(len(outputs)):
            if rng.random() < fault_prob:
                raw = rng.choice(HOSTILE_OUTPUTS)
                parse = parse_autoui_action if "action_type" in raw else parse_action
                outputs[i] = ActOutput(raw, parse(raw), 0.0, 0, 0.0, 0.0)
        return outputs

    return act


def _collect(
    envs: list[Any], tasks: list[str], actor: Any, seed: int, details: dict[str, int] | None = None
) -> tuple[int, int, int, int]:
    """Run ``tasks`` in collector-sized batches into a fresh local store: (attempts, corrupt, lost,
    crashed), counted from what reads back from the store. ``details`` receives how many stored
    episodes are ``env_error`` and how many stored steps did not parse (proof the faults happened)."""
    from storage.catalog import list_shards, read_shard
    from storage.schema import steps_to_table
    from storage.shards import ShardWriter, ShardWriterConfig
    from storage.store import open_store

    attempted: set[str] = set()
    crashed = unattempted = 0
    with tempfile.TemporaryDirectory() as root:
        store = open_store(root)
        writer = ShardWriter(store, ShardWriterConfig("faults", "c0", flush_episodes=16, flush_seconds=0))
        for start in range(0, len(tasks), BATCH):
            config = RolloutConfig(seed=seed + start, run_id=f"faults-{seed}", reset_backoff_s=0.05)
            try:
                result = run_episodes(actor, tasks[start : start + BATCH], config, envs=envs)
                attempted |= {e.episode_id for e in result.episodes}
                unattempted += result.unattempted
                by_episode: dict[str, list[dict]] = {}
                for row in result.rows:
                    by_episode.setdefault(row["episode_id"], []).append(row)
                for rows in by_episode.values():
                    writer.add_episode(steps_to_table(rows))
            except Exception:  # what would fail a collector's task run
                crashed += 1
        writer.close()
        stored: set[str] = set()
        corrupt = env_errors = invalid_steps = 0
        for shard in list_shards(store):
            try:
                table = read_shard(store, shard.path).to_pydict()
            except Exception:
                corrupt += 1
                continue
            stored |= set(table["episode_id"])
            env_errors += len(
                {
                    e
                    for e, s in zip(table["episode_id"], table["episode_status"], strict=True)
                    if s == "env_error"
                }
            )
            invalid_steps += table["action_valid"].count(False)
    if details is not None:
        details.update(env_error_episodes=env_errors, invalid_steps=invalid_steps)
    # Tasks no environment was left to try are not episodes: they count in neither attempts nor lost.
    return len(attempted), corrupt, len(attempted - stored), crashed


def _tasks(count: int, seed: int) -> list[str]:
    rng, pool = random.Random(seed), [task.task_id for task in load_tasks("general", "train")]
    return [rng.choice(pool) for _ in range(count)]


def faulty_devices(
    episodes: int = 1000, fault_prob: float = 0.05, seed: int = 0, details: dict[str, int] | None = None
) -> dict[str, Any]:
    """Devices that go offline, fail resets and drop taps, and a policy that emits hostile text,
    each at ``fault_prob``."""
    baseline = threading.active_count()
    envs = []
    for i in range(ENVS):
        faults = FaultConfig(
            seed=seed * 100 + i,
            offline_prob=fault_prob,
            offline_duration_s=0.02,
            reset_fail_prob=fault_prob,
            drop_tap_prob=fault_prob,
        )
        device = SimDroidConfig(distractor_prob=0.1, faults=faults)
        # No retries and no waiting: every fault surfaces as a failed reset or step (worst case).
        env_config = SimDroidEnvConfig(
            device=device,
            screenshots=False,
            ui_xml=False,
            seed=seed + i,
            reset_retries=0,
            wait_offline=False,
            serial=f"faulty-{i}",
        )
        envs.append(SimDroidEnv(env_config))
    attempts, corrupt, lost, crashed = _collect(
        envs, _tasks(episodes, seed), _hostile_actor(fault_prob, seed), seed, details
    )
    name = f"faulty_devices_{round(fault_prob * 100)}pct"
    return row(name, attempts, corrupt, lost, crashed, _settle_threads(baseline))


class _Rebooting(SimDroidEnv):
    """A device whose resets always fail (an emulator stuck rebooting)."""

    def reset(self, task: Any = None, seed: int | None = None) -> Any:
        raise ConnectionError(f"{self.device.serial} is rebooting")


def reset_outage(episodes: int = 400, seed: int = 0, details: dict[str, int] | None = None) -> dict[str, Any]:
    """One of four devices never resets: it is taken out per batch; no attempt may go unrecorded."""
    baseline = threading.active_count()
    config = SimDroidEnvConfig(screenshots=False, ui_xml=False)
    envs: list[Any] = [_Rebooting(dataclasses.replace(config, serial="outage-0"))] + [
        SimDroidEnv(dataclasses.replace(config, serial=f"outage-{i}")) for i in range(1, ENVS)
    ]
    attempts, corrupt, lost, crashed = _collect(
        envs, _tasks(episodes, seed), expert_actor(0.1, seed), seed, details
    )
    return row("reset_outage", attempts, corrupt, lost, crashed, _settle_threads(baseline))


def hostile_adb_clients(connections: int = 1000, idle_timeout_s: float = 0.3) -> dict[str, Any]:
    """Half-open connections, garbage headers and resets against the fake ADB server."""
    from simulators.fake_adb import FakeAdbConfig, FakeAdbServer

    payloads = (b"", b"00", b"0010host", b"ffff" + b"x" * 64, b"zzzz", b"-001")
    baseline = threading.active_count()
    crashed = lost = 0
    with tempfile.TemporaryDirectory() as root:
        token = Path(root) / "token"
        token.write_text("t\n")
        config = FakeAdbConfig(idle_timeout_s=idle_timeout_s, console_auth_token_path=token)
        with FakeAdbServer(config) as server:
            held = []
            for i in range(connections):
                sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
                if payloads[i % len(payloads)]:
                    sock.sendall(payloads[i % len(payloads)])
                held.append(sock)
            deadline = time.monotonic() + 60
            for sock in held:  # the clients never close: the server must
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                try:
                    while sock.recv(4096):
                        pass
                except TimeoutError:
                    lost += 1
                except OSError:
                    pass  # reset by the server: closed too
                sock.close()
            try:
                with socket.create_connection(("127.0.0.1", server.port), timeout=5) as probe:
                    probe.sendall(b"000chost:version")
                    crashed += probe.recv(4) != b"OKAY"
            except OSError:
                crashed += 1
    return row("hostile_adb_clients", connections, 0, lost, crashed, _settle_threads(baseline))


def parser_fuzz(inputs: int = 50_000, seed: int = 0) -> dict[str, Any]:
    """Random and near-miss model output through both parsers: no exception, every result storable."""
    rng = random.Random(seed)
    pieces = ['"action_type"', '"typed_text"', '"touch_point"', ": ", '"[0.5, 0.5]"', "[", "]", ",", '"']
    pieces += [
        "\\",
        "\ud83d",
        "\U0001f600",
        "type(",
        "tap(",
        ")",
        "Action Decision:",
        " " * 50,
        *HOSTILE_OUTPUTS,
    ]
    crashed = corrupt = 0
    for _ in range(inputs):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 12)))
        for parse in (parse_action, parse_autoui_action):
            action = parse(text)
            crashed += "internal parser error" in (action.reason or "")
            try:
                str(action).encode("utf-8")
            except UnicodeEncodeError:
                corrupt += 1
    return row("parser_fuzz", inputs * 2, corrupt, 0, crashed, 0)


SCENARIOS: list[Callable[[], dict[str, Any]]] = [
    faulty_devices,
    reset_outage,
    hostile_adb_clients,
    parser_fuzz,
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="a quick run at test-sized counts")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the scenarios' expected warnings would drown the table
    if args.small:
        rows = [faulty_devices(64), reset_outage(32), hostile_adb_clients(100), parser_fuzz(2000)]
    else:
        rows = [scenario() for scenario in SCENARIOS]
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
