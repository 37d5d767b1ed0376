"""One list of environment kinds (`distrl_core.envs.kinds.EnvKind`): the schema, the collector and
the factory all take theirs from it, and a config of no known kind is refused by name."""

from __future__ import annotations

import dataclasses
import random
from typing import get_args

import numpy as np
import pytest
from pydantic import ValidationError

from distrl_core.envs.kinds import ENV_KINDS, EnvKind
from simulators.adb.env import AdbEnv
from simulators.factory import CONFIG_OF_KIND, make_env
from simulators.sim_env import SimDroidEnv
from storage.schema import SchemaError, steps_to_table
from storage.synthetic import synthetic_episode
from tasks.collector import CollectorParams
from tasks.collector_envs import make_collector_envs


def test_every_part_takes_its_kinds_from_env_kind():
    assert ENV_KINDS == get_args(EnvKind) == ("sim", "adb")
    assert tuple(CONFIG_OF_KIND) == ENV_KINDS
    assert {SimDroidEnv.kind, AdbEnv.kind} == set(ENV_KINDS)
    assert get_args(CollectorParams.model_fields["env_kind"].annotation) == ENV_KINDS


def test_the_schema_accepts_each_kind_and_names_where_kinds_are_added():
    rows = synthetic_episode(np.random.default_rng(0), n_steps=2).to_pylist()
    for kind in ENV_KINDS:
        steps_to_table([dict(row, env_kind=kind) for row in rows])
    with pytest.raises(SchemaError, match=r"'env_kind' has value 'emulator'.*EnvKind"):
        steps_to_table([dict(row, env_kind="emulator") for row in rows])


def test_the_collector_refuses_an_unknown_kind_when_its_parameters_are_read():
    with pytest.raises(ValidationError, match="env_kind"):
        CollectorParams(env_kind="emulator")


def test_make_env_refuses_a_config_of_no_known_kind_by_name():
    @dataclasses.dataclass
    class CloudPhoneConfig:
        serial: str = "cloud-1"

    with pytest.raises(TypeError, match=r"CloudPhoneConfig.*SimDroidEnvConfig \('sim'\).*AdbEnvConfig"):
        make_env(CloudPhoneConfig())  # type: ignore[arg-type]


def test_the_collector_builds_its_simdroids_with_make_env():
    params = CollectorParams(num_envs=2, step_latency_s=0.5, task_latency_sigma=1.0)
    envs = make_collector_envs(params, random.Random(0))
    assert [type(env) for env in envs] == [SimDroidEnv, SimDroidEnv]
    assert [env.serial for env in envs] == ["sim-c0-0", "sim-c0-1"]
