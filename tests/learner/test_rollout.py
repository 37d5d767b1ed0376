"""Rollouts produce rows of the storage schema, with consistent episode facts."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from simulators.rollout import RolloutConfig, expert_actor, run_episodes
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from simulators.simdroid.device import SimDroidConfig
from simulators.simdroid.faults import FaultConfig
from storage.schema import COLUMN_NAMES, steps_to_table


def test_rows_follow_the_step_schema(episode_rows):
    assert set(episode_rows[0]) == set(COLUMN_NAMES)
    table = steps_to_table(episode_rows)  # validates types, nulls and value domains
    assert table.num_rows == len(episode_rows)


def test_episode_facts_are_consistent(episode_rows):
    episodes = defaultdict(list)
    for row in episode_rows:
        episodes[row["episode_id"]].append(row)
    assert len(episodes) == 8
    for rows in episodes.values():
        steps = [r["step"] for r in rows]
        assert steps == list(range(len(rows)))
        assert [r["done"] for r in rows] == [False] * (len(rows) - 1) + [True]
        assert len({r["episode_success"] for r in rows}) == 1
        assert sum(r["reward"] for r in rows) == (1.0 if rows[0]["episode_success"] else 0.0)
        assert all(r["policy_version"] == 3 and r["behaviour_logprob"] <= 0 for r in rows)


def test_the_noise_free_expert_solves_its_tasks_and_the_noisy_one_sometimes_fails():
    env = SimDroidEnvConfig(screenshots=False, ui_xml=False)
    tasks = [f"general-train-{i:04d}" for i in range(0, 140, 7)]
    clean = run_episodes(expert_actor(0.0, seed=0), tasks, RolloutConfig(env=env, parallel_envs=4))
    assert clean.success_rate == 1.0
    noisy = run_episodes(expert_actor(0.8, seed=0), tasks, RolloutConfig(env=env, parallel_envs=4))
    assert noisy.success_rate < 1.0
    assert noisy.num_steps > clean.num_steps


class _BrokenAfter(SimDroidEnv):
    """A device that fails on its n-th step of an episode (like an emulator that dies)."""

    def __init__(self, config, fail_at: int) -> None:
        super().__init__(config)
        self.fail_at = fail_at

    def step(self, action):
        if self.step_count + 1 == self.fail_at:
            raise ConnectionError("device went away")
        return super().step(action)


def test_environment_failures_end_episodes_as_env_error_and_the_rollout_goes_on():
    config = SimDroidEnvConfig(screenshots=False, ui_xml=False)
    tasks = ["general-train-0000", "general-train-0031", "general-train-0062"]
    result = run_episodes(expert_actor(0.0, seed=0), tasks, RolloutConfig(), envs=[_BrokenAfter(config, 2)])
    assert [e.status for e in result.episodes] == ["env_error", "env_error", "env_error"]
    assert all("ConnectionError" in e.error for e in result.episodes)
    assert {r["episode_status"] for r in result.rows} == {"env_error"}
    assert len(result.rows) == 3  # each episode's one completed step, closed with done=True
    assert all(r["done"] and not r["episode_success"] for r in result.rows)
    steps_to_table(result.rows)

    failing_reset = SimDroidEnvConfig(
        device=SimDroidConfig(faults=FaultConfig(reset_fail_prob=1.0)), reset_retries=0, screenshots=False
    )
    config = RolloutConfig(env=failing_reset, reset_backoff_s=0.0)
    result = run_episodes(expert_actor(0.0, seed=0), tasks[:2], config)
    assert [e.status for e in result.episodes] == ["env_error", "env_error"]
    # Every attempt reaches the store, as one step-0 row with no action, so SQL can count outages.
    assert [(r["step"], r["episode_status"], r["action_valid"], r["done"]) for r in result.rows] == [
        (0, "env_error", False, True)
    ] * 2
    assert result.num_steps == 0 and all(e.steps == 0 for e in result.episodes)
    steps_to_table(result.rows)


class _NeverResets(SimDroidEnv):
    def __init__(self, config, serial: str) -> None:
        super().__init__(dataclasses.replace(config, serial=serial))
        self.resets = 0

    def reset(self, task=None, seed=None):
        self.resets += 1
        raise ConnectionError("emulator is rebooting")


def test_an_environment_that_keeps_failing_resets_is_taken_out_and_every_attempt_is_recorded(caplog):
    env_config = SimDroidEnvConfig(screenshots=False, ui_xml=False)
    broken = _NeverResets(env_config, "emulator-5554")
    healthy = SimDroidEnv(dataclasses.replace(env_config, serial="emulator-5556"))
    tasks = [f"general-train-{i:04d}" for i in range(0, 60, 6)]
    config = RolloutConfig(max_reset_failures=2, reset_backoff_s=0.0)
    result = run_episodes(expert_actor(0.0, seed=0), tasks, config, envs=[broken, healthy])
    assert broken.resets == 2  # not one per pending task: it was taken out after two
    assert result.dropped_envs == ["emulator-5554"] and result.unattempted == 0
    assert "taking emulator-5554 out of this rollout" in caplog.text
    assert len(result.episodes) == len(tasks)
    assert [e.status for e in result.episodes].count("env_error") == 2
    assert {r["episode_id"] for r in result.rows} == {e.episode_id for e in result.episodes}
    steps_to_table(result.rows)

    alone = run_episodes(expert_actor(0.0, seed=0), tasks, config, envs=[_NeverResets(env_config, "e")])
    assert len(alone.episodes) == 2 and alone.unattempted == len(tasks) - 2
    assert "tasks not run" in caplog.text


def test_caller_environments_are_reused_and_recorded():
    env = SimDroidEnv(SimDroidEnvConfig(screenshots=False, ui_xml=False, serial="emulator-5556"))
    result = run_episodes(expert_actor(0.0, seed=0), ["general-train-0000"] * 3, RolloutConfig(), envs=[env])
    assert result.success_rate == 1.0
    assert {r["device_id"] for r in result.rows} == {"emulator-5556"}
    assert {r["env_kind"] for r in result.rows} == {"sim"}


def test_episode_ids_are_reproducible_within_a_run_and_distinct_across_runs():
    env = SimDroidEnvConfig(screenshots=False, ui_xml=False)
    tasks = ["general-train-0000", "general-train-0007"]

    def ids(run_id: str) -> set[str]:
        config = RolloutConfig(env=env, parallel_envs=2, seed=5, run_id=run_id)
        return {row["episode_id"] for row in run_episodes(expert_actor(0.0, seed=0), tasks, config).rows}

    assert ids("collector-a") == ids("collector-a")
    # A re-run of a deployment reuses its seed; the replay would drop its episodes as duplicates.
    assert not ids("collector-a") & ids("collector-b")


def test_the_in_memory_replay_keeps_only_ok_episodes():
    from simulators.local_loop import InMemoryReplay

    config = SimDroidEnvConfig(screenshots=False, ui_xml=False)
    failed = run_episodes(
        expert_actor(0.0, seed=0), ["general-train-0000"], RolloutConfig(), envs=[_BrokenAfter(config, 1)]
    )
    ok = run_episodes(expert_actor(0.0, seed=0), ["general-train-0000"], RolloutConfig())
    replay = InMemoryReplay()
    assert replay.add(failed.rows + ok.rows) == 1 and len(replay) == 1


def test_a_stop_mid_rollout_drops_the_unfinished_episodes_whole():
    env = SimDroidEnvConfig(screenshots=False, ui_xml=False)
    tasks = [f"general-train-{i:04d}" for i in range(0, 80, 5)]  # 16 episodes, 4 at a time
    full = run_episodes(expert_actor(0.3, seed=1), tasks, RolloutConfig(env=env, parallel_envs=4, seed=2))
    asked = []
    # Stop once the whole run is a third done (counted in steps): some episodes finished, some running.
    budget = sum(e.steps for e in full.episodes) // (3 * 4)
    cut = run_episodes(
        expert_actor(0.3, seed=1),
        tasks,
        RolloutConfig(env=env, parallel_envs=4, seed=2),
        stop=lambda: asked.append(1) or len(asked) > budget,
    )
    assert 0 < len(cut.episodes) < len(full.episodes)
    assert cut.abandoned > 0 and cut.unattempted == 0
    assert len(asked) == budget + 1  # asked before every step, and not once more after it said stop
    # What was kept is exactly the same episodes as in the uncut run, each whole.
    by_episode = defaultdict(list)
    for row in cut.rows:
        by_episode[row["episode_id"]].append(row)
    assert set(by_episode) == {e.episode_id for e in cut.episodes}
    full_ids = {e.episode_id: e.steps for e in full.episodes}
    for episode_id, rows in by_episode.items():
        assert len(rows) == full_ids[episode_id] and rows[-1]["done"]
