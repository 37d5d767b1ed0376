"""Configuration of the learner's prioritized replay (one place for every knob and its checks)."""

from __future__ import annotations

import math

from pydantic import model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class ReplaySettings(BaseSettings):
    """Replay configuration; every field can be set as `DISTRL_REPLAY_<FIELD>`.

    The importance-sampling exponent β is not here: the learner anneals it with its own schedule
    (``LearnerConfig.beta_start``/``beta_end``/``beta_anneal_updates``) and passes it to each sample.
    """

    # use_attribute_docstrings: the notes under the fields are their descriptions (the docs'
    # configuration table is rendered from them, ops/config_table.py).
    model_config = SettingsConfigDict(
        env_prefix="DISTRL_REPLAY_", extra="ignore", frozen=True, use_attribute_docstrings=True
    )

    capacity_steps: int = 200_000
    """Steps kept; the oldest episodes are evicted first (a circular buffer over episodes)."""
    min_size_steps: int = 1_000
    """Steps that must be ingested before the first sample."""
    alpha: float = 0.6
    """Priority exponent: sampling probability is proportional to priority**alpha (0 = uniform)."""
    initial_priority: float = 1.0
    """Priority of a new trajectory before the learner has seen it (raised to the largest seen)."""
    min_priority: float = 1e-6
    """Floor applied to written-back priorities so that every fresh trajectory stays sampleable."""
    max_policy_lag: int | None = None
    """Trajectories from policy versions older than `current - max_policy_lag` are not sampled."""
    samples_per_insert: float | None = 8.0
    """Sample-to-insert ratio limit in steps (Reverb style); None disables it."""
    error_buffer_steps: float = 2_000.0
    """Slack of the ratio limit, in sampled steps."""
    block_size: int = 128
    """Trajectories per sampling block (stage 3 of the sampler)."""
    super_size: int = 32
    """Blocks per super-block (stage 2 of the sampler)."""
    db_path: str = ":memory:"
    """DuckDB file of the replay; ':memory:' keeps it in RAM. A file lets a restart resume locally."""
    learner_id: str = "learner"
    """Names this learner's priority snapshot in the store (`replay/<learner_id>/priorities.parquet`)."""
    checkpoint_every_updates: int = 100
    """Priority write-backs between snapshots to the store; a crash loses at most this many."""
    keep_screenshots: bool = True
    """Copy screenshots into the replay (needed by vision policies; costs disk)."""
    duckdb_threads: int = 2
    """Threads DuckDB may use for replay queries."""
    ingest_batch_shards: int = 16
    """Shards ingested per DuckDB transaction (each shard is in the replay, and recorded, with its whole
    batch or not at all). Larger batches ingest more shards per second; a batch's shards are in
    memory together, decoded (this many times a shard's size, screenshots included)."""
    discovery_slack_days: int = 1
    """After the first scan, a scan lists only the `date=` partitions from the newest one seen (at most
    today, UTC) minus this many days; a shard written later than that into an older partition is found
    by the next full scan (the next learner process's first scan, or `discovery_full_scan_every`)."""
    discovery_full_scan_every: int = 0
    """Every N-th scan lists the store's whole history again (finds shards written more than
    `discovery_slack_days` late); 0: only a process's first scan does."""

    @model_validator(mode="after")
    def _checked(self) -> ReplaySettings:
        return self.validate_all()

    def validate_all(self) -> ReplaySettings:
        """Raise one `ValueError` naming every bad field with its `DISTRL_REPLAY_*` variable."""
        checks = [
            ("capacity_steps", self.capacity_steps > 0, "must be > 0"),
            (
                "min_size_steps",
                0 <= self.min_size_steps <= self.capacity_steps,
                "must be between 0 and capacity_steps, or sampling could never start",
            ),
            ("alpha", 0 <= self.alpha <= 1, "must be in [0, 1]"),
            # inf would pass `> 0` and turn every sampling probability into NaN.
            ("initial_priority", _positive(self.initial_priority), "must be a finite number > 0"),
            ("min_priority", _positive(self.min_priority), "must be a finite number > 0"),
            (
                "max_policy_lag",
                self.max_policy_lag is None or self.max_policy_lag >= 0,
                "must be >= 0 or None",
            ),
            (
                "samples_per_insert",
                self.samples_per_insert is None or _positive(self.samples_per_insert),
                "must be a finite number > 0 or None",
            ),
            (
                "error_buffer_steps",
                math.isfinite(self.error_buffer_steps) and self.error_buffer_steps >= 0,
                "must be a finite number >= 0",
            ),
            (
                "block_size",
                self.block_size >= 2 and self.super_size >= 2,
                "block_size and super_size must be >= 2",
            ),
            ("checkpoint_every_updates", self.checkpoint_every_updates >= 1, "must be >= 1"),
            ("duckdb_threads", self.duckdb_threads >= 1, "must be >= 1 (DuckDB needs at least one thread)"),
            ("ingest_batch_shards", self.ingest_batch_shards >= 1, "must be >= 1"),
            ("discovery_slack_days", self.discovery_slack_days >= 0, "must be >= 0"),
            ("discovery_full_scan_every", self.discovery_full_scan_every >= 0, "must be >= 0 (0: never)"),
            (
                "learner_id",
                self.learner_id.replace("_", "").replace("-", "").isalnum(),
                "letters, digits, _ and -",
            ),
        ]
        problems = [
            f"{name} (DISTRL_REPLAY_{name.upper()}) {message}, got {getattr(self, name)!r}"
            for name, ok, message in checks
            if not ok
        ]
        if problems:
            raise ValueError("replay config: " + "; ".join(problems))
        return self


def _positive(value: float) -> bool:
    return math.isfinite(value) and value > 0
