"""Rollouts produce rows of the storage schema, with consistent episode facts."""

from __future__ import annotations

from collections import defaultdict

from distrl_core.envs.sim_env import SimDroidEnv, SimDroidEnvConfig
from distrl_core.envs.simdroid.device import SimDroidConfig
from distrl_core.envs.simdroid.faults import FaultConfig
from distrl_core.rollout import RolloutConfig, expert_actor, run_episodes
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
    result = run_episodes(expert_actor(0.0, seed=0), tasks[:2], RolloutConfig(env=failing_reset))
    assert [e.status for e in result.episodes] == ["env_error", "env_error"] and result.rows == []


def test_caller_environments_are_reused_and_recorded():
    env = SimDroidEnv(SimDroidEnvConfig(screenshots=False, ui_xml=False))
    env.device.serial = "emulator-5556"
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
