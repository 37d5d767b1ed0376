"""The `learn` deployment's parameters (`LearnerParams`): bounds, defaults, and the checks that
refuse a combination the learner cannot train (a batch that does not split over its processes, a
window where the algorithm needs whole episodes)."""

from __future__ import annotations

import ipaddress
from typing import Any, get_args

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

from distrl_core.learner.config import Algorithm, LearnerConfig, learner_config
from distrl_core.learner.distributed import batch_split_problem
from distrl_core.learner.losses import loss_type
from tasks.bounds import MAX_BATCH, MAX_MINUTES, MAX_PROCESSES, MAX_SECONDS, MAX_SEED, MAX_UPDATES
from tasks.learner_ranks import RankNetwork


def check_learner_config(cls: type[BaseModel], value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
    """The `learner_config` field's validator of the learn and retrain parameters: the overrides must
    make a LearnerConfig with the model's algorithm and seed (fields declared before learner_config)."""
    learner_config(info.data.get("algorithm", "aride"), info.data.get("seed", 0), value)
    return value


class LearnerParams(BaseModel):
    """Parameters of the `learn` deployment."""

    batch_size: int = Field(16, ge=1, le=MAX_BATCH, description="Trajectories per update.")
    window: int | None = Field(
        None, ge=1, le=MAX_BATCH, description="Steps per sampled window (None: whole trajectories)."
    )
    updates_per_block: int = Field(8, ge=1, le=MAX_UPDATES, description="Updates per task run.")
    publish_every_updates: int = Field(
        16, ge=1, le=MAX_UPDATES, description="Publish a new version every K updates."
    )
    max_updates: int | None = Field(
        None, ge=1, le=MAX_UPDATES, description="Stop after this many updates (None: no limit)."
    )
    max_minutes: float | None = Field(
        None, gt=0, le=MAX_MINUTES, description="Stop after this many minutes (None: no limit)."
    )
    idle_sleep_s: float = Field(
        1.0, ge=0, le=MAX_SECONDS, description="Wait when the replay is not ready (too small or ratio)."
    )
    store_uri: str | None = Field(None, description="Trajectory store (default: DISTRL_STORE_URI).")
    background_ingest: bool = Field(
        False,
        description="`ingest_shards` starts a scan in a background thread and returns the last finished "
        "scan's report, so updates never wait on Parquet reads (the asynchronous learner); False: ingest now.",
    )
    algorithm: Algorithm = Field(
        "aride",
        description=f"One of {', '.join(get_args(Algorithm))} (see LearnerConfig); gigpo is critic-free, with "
        "groups of episodes of one task and policy version within a batch; decoupled_ppo is AReaL's "
        "staleness-aware PPO (docs/architecture.md).",
    )
    seed: int = Field(0, ge=0, le=MAX_SEED, description="Seeds the learner.")
    learner_config: dict[str, Any] = Field(
        default_factory=dict,
        description="Overrides of LearnerConfig fields other than algorithm and seed, e.g. "
        "{'actor_lr': 1e-4, 'entropy_coef': 0.01} (the critic-only warm-up, critic_warmup_updates, "
        "counts from the learner's first update).",
    )

    learner_processes: int = Field(1, ge=1, le=MAX_PROCESSES, description=(
        "Processes the learner trains on here (DDP: gloo on CPU, NCCL on GPUs); this one is rank 0 (replay, "
        "MLflow, registry) and starts the others on this machine; each of all the ranks (learner_processes + "
        "learner_remote_processes) trains on an equal share of batch_size trajectories."
    ))  # fmt: skip
    learner_remote_processes: int = Field(0, ge=0, le=MAX_PROCESSES, description=(
        "Follower ranks on other hosts, each host's started by `python -m tasks.learner_follower --head "
        "LEARNER_ADDRESS:LEARNER_PORT --processes N` with the same DISTRL_LEARNER_RANK_KEY as here."
    ))  # fmt: skip
    learner_address: str = Field("127.0.0.1", description=(
        "The address rank 0 serves the ranks' rendezvous on: loopback on one host, this host's address on the "
        "learner network when other hosts run followers (it is bound to that address alone)."
    ))  # fmt: skip
    learner_port: int = Field(0, ge=0, le=65535, description=(
        "The rendezvous port; 0 takes a free one (one host); set it when other hosts run followers."
    ))  # fmt: skip
    learner_interface: str | None = Field(None, max_length=64, description=(
        "The network interface the ranks' gloo connections use; None: the one holding learner_address."
    ))  # fmt: skip
    learner_rejoin_timeout_s: float = Field(120.0, gt=0, le=MAX_SECONDS, description=(
        "After a learner rank is lost: seconds to wait for the group to fill again (this host's followers are "
        "restarted) before training on with the ranks there are; the failed update is trained again."
    ))  # fmt: skip

    _check_learner_config = field_validator("learner_config")(check_learner_config)

    @field_validator("learner_address")
    @classmethod
    def _an_ip_address(cls, value: str) -> str:
        try:
            ipaddress.IPv4Address(value)
        except ValueError:
            raise ValueError(
                f"learner_address={value!r} is not an IPv4 address: give this host's address on the learner "
                "network (a name would leave open which interface the rendezvous binds to)"
            ) from None
        return value

    @property
    def world(self) -> int:
        """Learner ranks in all: this host's and the other hosts'."""
        return self.learner_processes + self.learner_remote_processes

    def rank_network(self) -> RankNetwork:
        return RankNetwork(
            address=self.learner_address,
            port=self.learner_port,
            interface=self.learner_interface,
            remote_processes=self.learner_remote_processes,
            rejoin_timeout_s=self.learner_rejoin_timeout_s,
        )

    def to_learner_config(self) -> LearnerConfig:
        """The LearnerConfig these parameters ask for: algorithm and seed, then the overrides."""
        return learner_config(self.algorithm, self.seed, self.learner_config)

    @model_validator(mode="after")
    def _whole_episodes_when_the_algorithm_needs_them(self) -> LearnerParams:
        if problem := batch_split_problem(
            self.batch_size, self.learner_processes + self.learner_remote_processes
        ):
            raise ValueError(problem)
        if self.learner_remote_processes and (self.learner_port == 0 or self.learner_address == "127.0.0.1"):
            raise ValueError(
                f"learner_remote_processes={self.learner_remote_processes} needs an address and port the other "
                "hosts can reach: set learner_address to this host's address on the learner network and "
                "learner_port to a fixed port (e.g. 29400)"
            )
        if self.world > 1 and self.learner_config.get("proximal_policy") == "average":
            # Only rank 0 keeps the weight average (it publishes), so the other ranks have no π_prox.
            raise ValueError(
                "proximal_policy='average' reads the weight average that only the first learner process "
                "keeps; with learner_processes > 1 use proximal_policy='update_start'"
            )
        if loss_type(self.algorithm).traits.needs_whole_episodes and self.window is not None:
            raise ValueError(
                f"algorithm {self.algorithm!r} compares whole episodes' returns, but window={self.window} "
                "samples pieces of them; set window=None"
            )
        if self.learner_config.get("shortest_path_exponent", 0) and self.window is not None:
            raise ValueError(
                f"shortest_path_exponent scales a success by its episode's length, but window={self.window} "
                "samples pieces of episodes; set window=None or shortest_path_exponent=0"
            )
        return self
