"""Configuration of the learner's prioritized replay (one place for every knob and its checks)."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict


class ReplaySettings(BaseSettings):
    """Replay configuration; every field can be set as `DISTRL_REPLAY_<FIELD>`."""

    model_config = SettingsConfigDict(env_prefix="DISTRL_REPLAY_", extra="ignore", frozen=True)

    capacity_steps: int = 200_000
    """Steps kept; the oldest episodes are evicted first (a circular buffer over episodes)."""
    min_size_steps: int = 1_000
    """Steps that must be ingested before the first sample."""
    alpha: float = 0.6
    """Priority exponent: sampling probability is proportional to priority**alpha (0 = uniform)."""
    beta_start: float = 0.4
    """Importance-sampling exponent at the first update; annealed linearly to `beta_end`."""
    beta_end: float = 1.0
    """Importance-sampling exponent once annealing is over (1 = full correction)."""
    beta_anneal_updates: int = 10_000
    """Learner updates over which beta goes from `beta_start` to `beta_end`."""
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

    def validate_all(self) -> ReplaySettings:
        checks = [
            (self.capacity_steps > 0, "capacity_steps must be > 0"),
            (
                0 <= self.min_size_steps <= self.capacity_steps,
                "min_size_steps must be between 0 and capacity_steps, or sampling could never start",
            ),
            (0 <= self.alpha <= 1, "alpha must be in [0, 1]"),
            (0 <= self.beta_start <= self.beta_end <= 1, "need 0 <= beta_start <= beta_end <= 1"),
            (self.beta_anneal_updates >= 1, "beta_anneal_updates must be >= 1"),
            (self.initial_priority > 0 and self.min_priority > 0, "priorities must be > 0"),
            (self.max_policy_lag is None or self.max_policy_lag >= 0, "max_policy_lag must be >= 0 or None"),
            (self.block_size >= 2 and self.super_size >= 2, "block_size and super_size must be >= 2"),
            (self.checkpoint_every_updates >= 1, "checkpoint_every_updates must be >= 1"),
            (
                self.learner_id.replace("_", "").replace("-", "").isalnum(),
                "learner_id: letters, digits, _ and -",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"replay config: {message}")
        return self

    def beta_at(self, update: int) -> float:
        """Linearly annealed importance-sampling exponent for learner update `update`."""
        frac = min(1.0, max(0, update) / self.beta_anneal_updates)
        return self.beta_start + frac * (self.beta_end - self.beta_start)
