"""Tasks of the scheduled `retrain` flow: start from a chosen version, learn from a recent window only.

The continuous learner (`tasks.learner`) always resumes from `latest` and ingests every shard. A
retrain differs in two ways, and only these live here; ingesting, training blocks, publishing and
evaluating reuse the learner's and the evaluation's tasks:

- it starts from a version picked by alias (usually `champion`), with a fresh optimiser and a fresh
  in-memory replay of its own (`learner_id="retrain"`, so it never overwrites the continuous
  learner's priority snapshot);
- its replay sees only shards whose `date=<yyyy-mm-dd>` partition lies in a window of UTC days.
  The partition is the UTC day on which the collector flushed the shard, so the window selects by
  write day, without opening any shard: an episode that ended shortly before midnight (by at most
  the collector's `flush_seconds`) belongs to the next day's partition.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from distrl_core.learner.config import LearnerConfig
from storage.catalog import Catalog, ShardInfo, partition_day
from storage.registry import CHAMPION, LATEST, PolicyRegistry
from storage.replay_config import ReplaySettings
from storage.secrets import redact
from tasks.evaluation import HELDOUT_TAG
from tasks.learner import LearnerParams, LearnerSession, open_learner
from tasks.retry import only_transient

RETRAIN_LEARNER_ID = "retrain"
# A retrain trains a fixed number of updates over a fixed window: the ratio limiter (meant for a
# learner racing a live fleet) would only stall it, and a file-backed replay would carry old episodes
# (or be the continuous learner's own file, named by DISTRL_REPLAY_DB_PATH on the learner machine).
RETRAIN_REPLAY_DEFAULTS: dict[str, Any] = {
    "learner_id": RETRAIN_LEARNER_ID,
    "samples_per_insert": None,
    "db_path": ":memory:",
}


class RetrainDataError(RuntimeError):
    """The recent window cannot feed the fine-tune (too few steps, or nothing left to sample)."""


# ----- pure helpers ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class DayWindow:
    """UTC days `first`..`last`, both included."""

    first: date
    last: date

    @classmethod
    def ending(cls, last: date, days: int) -> DayWindow:
        if days < 1:
            raise ValueError(f"a window of recent days needs days >= 1, got {days}")
        return cls(last - timedelta(days=days - 1), last)

    def __contains__(self, day: date) -> bool:
        return self.first <= day <= self.last

    def __str__(self) -> str:
        return f"{self.first.isoformat()}..{self.last.isoformat()}"


def replay_settings(overrides: dict[str, Any]) -> ReplaySettings:
    """The retrain's replay: `RETRAIN_REPLAY_DEFAULTS` under the overrides; always in memory."""
    known = set(ReplaySettings.model_fields)
    unknown = sorted(set(overrides) - known)
    if unknown:
        # ReplaySettings ignores unknown keys (it reads the environment): a typo would pass silently.
        raise ValueError(f"replay: unknown field(s) {unknown}; ReplaySettings has {sorted(known)}")
    if overrides.get("db_path", ":memory:") != ":memory:":
        raise ValueError(
            "replay.db_path: a retrain builds a fresh in-memory replay of its window; a file would bring "
            "back episodes from earlier runs. Leave db_path unset."
        )
    return ReplaySettings(**(RETRAIN_REPLAY_DEFAULTS | overrides)).validate_all()


# ----- the windowed replay ------------------------------------------------------------------------
class WindowCatalog(Catalog):
    """A catalog whose scans return only shards in a window of `date=` partitions.

    Shards outside the window (or without a date partition) are left out of every scan, including
    shards written while the retrain runs, and counted so the flow can report them.
    """

    def __init__(self, base: Catalog, window: DayWindow) -> None:
        super().__init__(
            base.store, base.known, slack_days=base.slack_days, full_scan_every=base.full_scan_every
        )
        self.window = window
        self.outside: set[str] = set()
        self.undated: set[str] = set()

    def scan(self) -> list[ShardInfo]:
        inside = []
        for shard in super().scan():
            day = partition_day(shard.path)
            if day is None:
                self.undated.add(shard.path)
            elif day in self.window:
                inside.append(shard)
            else:
                self.outside.add(shard.path)
        return inside


def open_retrain_learner(
    params: LearnerParams,
    config: LearnerConfig,
    replay: ReplaySettings,
    *,
    start_version: int,
    window: DayWindow,
    run_tags: dict[str, str] | None = None,
) -> LearnerSession:
    """A learner session on `start_version`'s weights whose replay ingests only `window`, in an
    MLflow run of its own (tagged `role=retrain`)."""
    tags = {"retrain_window": str(window)} | (run_tags or {})
    session = open_learner(
        params, replay, start_version=start_version, config=config, role="retrain", run_tags=tags
    )
    buffer = session.replay
    buffer.catalog = WindowCatalog(buffer.catalog, window)  # before the first scan: nothing else is read
    return session


def window_summary(session: LearnerSession) -> dict[str, int]:
    """Shards the window left out so far (outside it, or with no date partition)."""
    catalog = session.replay.catalog
    if not isinstance(catalog, WindowCatalog):
        raise TypeError(f"learner run {session.run_id} was not opened by open_retrain_learner")
    return {"shards_outside_window": len(catalog.outside), "shards_undated": len(catalog.undated)}


def limit_next_block(session: LearnerSession, updates: int) -> None:
    """Make the next `train_block` run at most `updates` updates (so a retrain does exactly N)."""
    if updates < session.params.updates_per_block:
        session.params = session.params.model_copy(update={"updates_per_block": max(1, updates)})


# ----- registry tasks -----------------------------------------------------------------------------
@task(retries=3, retry_delay_seconds=2, retry_condition_fn=only_transient, cache_policy=NO_CACHE)
def resolve_start_version(ref: str) -> tuple[int, str]:
    """(version, what it was resolved from). `champion` falls back to `latest` when there is none."""
    registry = PolicyRegistry()
    version = registry.resolve(ref)
    if version is not None and str(ref).isdigit() and version not in registry.versions():
        raise LookupError(f"no version {version} of '{registry.name}'; it has {registry.versions()}")
    if version is not None:
        return version, ref
    latest = registry.resolve(LATEST) if str(ref).lower() == CHAMPION else None
    if latest is not None:
        return latest, LATEST
    raise LookupError(
        f"no policy version for {ref!r} in registered model '{registry.name}' at "
        f"{redact(registry.settings.tracking_uri)}: a retrain fine-tunes an existing version. Publish one first "
        "(`distrl train-local` publishes a warm start as version 1; the `learn` deployment publishes more), "
        "check DISTRL_MLFLOW_TRACKING_URI / DISTRL_MLFLOW_MODEL_NAME, or pass start_policy=<version>."
    )


@task(retries=3, retry_delay_seconds=2, retry_condition_fn=only_transient, cache_policy=NO_CACHE)
def current_champion() -> tuple[int | None, float | None]:
    """The `champion` version and its recorded held-out success (None: none, or never evaluated)."""
    registry = PolicyRegistry()
    version = registry.resolve(CHAMPION)
    if version is None:
        return None, None
    recorded = registry.tags(version).get(HELDOUT_TAG)
    return version, None if recorded is None else float(recorded)


@task(retries=3, retry_delay_seconds=2, retry_condition_fn=only_transient, cache_policy=NO_CACHE)
def tag_candidate(version: int, window: str) -> dict[str, str]:
    """Mark a published version as a retrain candidate (`publish_policy` already names its parent)."""
    registry = PolicyRegistry()
    tags = {"retrain": "true", "retrain_window": window}
    for key, value in tags.items():
        registry.client.set_model_version_tag(registry.name, str(version), key, value)
    return tags
