"""The learner's prioritized trajectory replay: DuckDB tables fed from the store's shards.

`ingest()` reads only shards not seen before (bad ones, values out of bounds or versions the
registry never published included, are quarantined: `storage.catalog`), keeps trainable episodes
(status `ok`, fresh enough, not already present), evicts the oldest beyond capacity, and gives new
trajectories the largest priority seen so far. `sample()` draws trajectories with replacement in
proportion to priority**alpha (`replay_sample`, with `replay_sql`'s three-stage query) and returns
their steps, whole or as fixed-length windows, with importance-sampling weights. `update_priorities()` writes
the loss's priorities back; `checkpoint()` persists them to the store so a new learner resumes them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage import replay_sql as sql
from storage.catalog import BadShard, Catalog, try_read_shard
from storage.rate_limiter import ReplayNotReady, SampleToInsertRatio
from storage.replay_config import ReplaySettings
from storage.replay_ingest import IngestReport, NewestVersion, quarantine_for_memory, shard_steps
from storage.replay_sample import SampleBatch, draw_batch, last_priorities
from storage.replay_snapshot import MAX_PRIORITY, read_priority_snapshot, write_priority_snapshot
from storage.schema import STEP_SCHEMA
from storage.sql_limits import QueryLimits, SqlSettings
from storage.store import REPLAY_STATE_DIR, Store, redact, store_errors

log = logging.getLogger(__name__)

__all__ = ["IngestReport", "Replay", "ReplayNotReady", "SampleBatch"]


class Replay:
    """Prioritized replay over a store. Not shared across processes; methods are thread-safe."""

    def __init__(
        self,
        store: Store,
        config: ReplaySettings | None = None,
        *,
        newest_version: Callable[[], int | None] | None = None,
        limits: SqlSettings | None = None,
    ) -> None:
        """`newest_version` asks the registry for its newest published version (the learner passes
        it): a shard with a newer one is quarantined. Without it only the schema's bound applies.
        `limits`: DuckDB's memory and spill limits, the `DISTRL_SQL_*` settings `distrl sql` has."""
        self.store = store
        self.config = (config or ReplaySettings()).validate_all()
        self._lock = threading.RLock()
        self.con = duckdb.connect(self.config.db_path, config={"threads": self.config.duckdb_threads})
        # Without a limit DuckDB takes 80 % of RAM: a shard that decodes big died as an unhandled
        # OutOfMemoryException at 5.7 GB. Spill goes to a private folder, capped.
        self.limits = QueryLimits(limits or SqlSettings())
        self.limits.apply(self.con)
        self.con.execute(sql.CREATE_TABLES)
        self.con.register("step_schema", STEP_SCHEMA.empty_table())
        self.con.execute(sql.CREATE_STEPS)
        self.con.unregister("step_schema")
        self.catalog = Catalog(
            store,
            known=(row[0] for row in self.con.execute("SELECT path FROM shards").fetchall()),
            slack_days=self.config.discovery_slack_days,
            full_scan_every=self.config.discovery_full_scan_every,
        )
        self._load_meta()
        self.versions = NewestVersion(newest_version, known=self.policy_version)
        self.limiter = SampleToInsertRatio(
            self.config.samples_per_insert,
            self.config.min_size_steps,
            self.config.error_buffer_steps,
            inserted=int(self._meta.get("inserted_steps", 0)),
            sampled=int(self._meta.get("sampled_steps", 0)),
        )
        sql.prepare(self.con)
        self._rng = np.random.default_rng()
        self._updates_since_checkpoint = 0
        self.checkpoint_pending = False  # the last checkpoint failed; the learner retries it
        self._restored: dict[str, float] = {}
        if self._meta.get("next_slot", 0) == 0:
            self._load_priority_snapshot()

    # ----- state ---------------------------------------------------------------------------------
    def _load_meta(self) -> None:
        self._meta = dict(self.con.execute("SELECT key, value FROM replay_meta").fetchall())
        self.next_slot = int(self._meta.get("next_slot", 0))
        self.first_slot = int(self._meta.get("first_slot", 0))
        self.policy_version = int(self._meta.get("policy_version", 0))
        self.max_priority = float(self._meta.get("max_priority", self.config.initial_priority))
        self.size_steps = int(self.con.execute(sql.STEPS_HELD).fetchall()[0][0])

    def _save_meta(self, **pending: float) -> None:
        """Write the counters; `pending` gives values that take effect when the caller's transaction commits."""
        values = {
            "next_slot": self.next_slot,
            "first_slot": self.first_slot,
            "policy_version": self.policy_version,
            "max_priority": self.max_priority,
            "inserted_steps": self.limiter.inserted,
            "sampled_steps": self.limiter.sampled,
        } | pending
        self.con.executemany(sql.SAVE_META, list(values.items()))

    def _params(self, **extra: object) -> dict[str, object]:
        lag = self.config.max_policy_lag
        cutoff = self.policy_version - lag if lag is not None else -(2**62)
        return {
            "B": self.config.block_size,
            "alpha": self.config.alpha,
            "version_cutoff": cutoff,
            "first_slot": self.first_slot,
            **extra,
        }

    def _supers_of(self, slots: np.ndarray) -> list[int]:
        per_super = self.config.block_size * self.config.super_size
        return np.unique(np.asarray(slots, dtype=np.int64) // per_super).tolist()

    @property
    def episodes(self) -> int:
        with self._lock:  # a learner's prefetch thread may be sampling on the same connection
            return int(self.con.execute("SELECT count(*) FROM episodes").fetchall()[0][0])

    # ----- ingestion ----------------------------------------------------------------------------
    def ingest(self, max_shards: int | None = None) -> IngestReport:
        """Ingest shards not seen before; bad shards are quarantined and never stop ingestion.

        Good shards go in batches of `ingest_batch_shards`, one DuckDB transaction each, which also
        records the batch's shards and the replay's counters: after a crash a shard is either in the
        replay and recorded as ingested, or neither (then the next scan lists it again).
        """
        totals = dict.fromkeys(IngestReport.__dataclass_fields__, 0)
        with self._lock:
            batch: list[tuple[str, pa.Table]] = []
            for shard in self.catalog.scan()[:max_shards]:
                table, bad = try_read_shard(
                    self.store,
                    shard.path,
                    mode="move",
                    version_bound=self.versions.bound,
                    without_images=not self.config.keep_screenshots,  # not even read: most of a shard's bytes
                )
                if bad is not None and bad.transient:
                    self.catalog.forget(shard.path)  # not marked: a later scan lists it again (or no longer)
                    continue
                if bad is not None:
                    self._set_aside(bad, totals)
                    continue
                assert table is not None
                batch.append((shard.path, table))
                if len(batch) >= self.config.ingest_batch_shards:
                    self._ingest_batch(batch, totals)
                    batch = []
            if batch:
                self._ingest_batch(batch, totals)
            if totals["episodes"]:
                totals["evicted_episodes"] = self._evict()
            self._save_meta()
        return IngestReport(**totals)

    def _ingest_batch(self, batch: list[tuple[str, pa.Table]], totals: dict[str, int]) -> None:
        try:
            added, skipped, steps = self._insert_batch(batch)
        except duckdb.OutOfMemoryException as exc:
            if len(batch) > 1:  # shard by shard: only one that does not fit alone is set aside
                for one in batch:
                    self._ingest_batch([one], totals)
                return
            self._set_aside(quarantine_for_memory(self.store, batch[0][0], self.limits, str(exc)), totals)
            return
        for path, _ in batch:
            self.catalog.mark(path)
        totals["shards"] += len(batch)
        totals["transactions"] += 1
        totals["episodes"] += added
        totals["skipped_episodes"] += skipped
        totals["steps"] += steps

    def _set_aside(self, bad: BadShard, totals: dict[str, int]) -> None:
        """Record a quarantined (or skipped) shard as handled: no later scan, nor a restart from a
        file database, reads it again."""
        self.con.execute(sql.RECORD_QUARANTINED_SHARD, [bad.path, bad.reason])
        self.catalog.mark(bad.path)
        totals["quarantined"] += 1

    def _insert_batch(self, batch: list[tuple[str, pa.Table]]) -> tuple[int, int, int]:
        table, rows, all_episodes = shard_steps(batch, keep_screenshots=self.config.keep_screenshots)
        paths = [path for path, _ in batch]
        self.con.register("shard_steps", table)
        try:
            with sql.transaction(self.con):
                new = sql.query(
                    self.con, sql.NEW_EPISODES, {"version_cutoff": self._params()["version_cutoff"]}
                ).to_arrow_table()
                n = new.num_rows
                slots = np.arange(self.next_slot, self.next_slot + n, dtype=np.int64)
                ids = new.column("episode_id").to_pylist()
                priorities = np.array(
                    [self._restored.get(e, self.max_priority) for e in ids], dtype=np.float64
                )
                where = new.column("__shard").to_numpy()
                new = (
                    new.append_column("slot", pa.array(slots))
                    .append_column("priority", pa.array(priorities))
                    .append_column("shard", pa.array([paths[i] for i in where], pa.string()))
                )
                self.con.register("new_items", new)
                self.con.execute(sql.INSERT_EPISODES)
                self.con.execute(sql.INSERT_STEPS)
                if n:
                    sql.run_script(self.con, sql.INSERT_ITEMS, self._params(S=self.config.super_size))
                    sql.rebuild_supers(self.con, self._supers_of(slots))
                steps = int(pc.sum(new.column("n_steps")).as_py() or 0)
                per_shard = np.bincount(where, minlength=len(batch)) if n else np.zeros(len(batch), np.int64)
                self.con.register(
                    "batch_shards", pa.table({"path": paths, "rows": rows, "episodes": per_shard})
                )
                self.con.execute(sql.RECORD_INGESTED_SHARDS)
                # The counters commit with the rows they count: a restart from a file database that
                # kept this batch must not hand its slots out again.
                self._save_meta(next_slot=self.next_slot + n, inserted_steps=self.limiter.inserted + steps)
        finally:
            for name in ("shard_steps", "new_items", "batch_shards"):
                self.con.unregister(name)
        self.next_slot += n
        self.size_steps += steps
        self.limiter.record_insert(steps)
        for episode_id in ids:
            self._restored.pop(episode_id, None)
        return n, all_episodes - n, steps

    def _evict(self) -> int:
        if self.size_steps <= self.config.capacity_steps:
            return 0
        ((cutoff,),) = self.con.execute(
            sql.EVICTION_CUTOFF, {"capacity": self.config.capacity_steps}
        ).fetchall()
        cutoff = self.next_slot if cutoff is None else int(cutoff)
        before, old_first, self.first_slot = self.episodes, self.first_slot, cutoff
        sql.run_script(self.con, sql.EVICT, {"cut": cutoff})
        self.con.execute(sql.DROP_EVICTED_BLOCKS, {"B": self.config.block_size, "first_slot": cutoff})
        sql.run_script(self.con, sql.REWEIGHT_STALE, self._params())
        per_super = self.config.block_size * self.config.super_size
        sql.rebuild_supers(self.con, list(range(old_first // per_super, cutoff // per_super + 1)))
        self.size_steps = int(self.con.execute(sql.STEPS_HELD).fetchall()[0][0])
        return before - self.episodes

    # ----- policy versions ----------------------------------------------------------------------
    def set_policy_version(self, version: int) -> None:
        """Tell the replay the learner's current version; trajectories beyond `max_policy_lag` stop being sampled."""
        with self._lock:
            self.versions.saw(version)  # a version the learner holds exists
            if version == self.policy_version:
                return
            self.policy_version = version
            if self.config.max_policy_lag is not None:
                sql.run_script(self.con, sql.REWEIGHT_STALE, self._params())
                sql.rebuild_supers(self.con, None)
            self._save_meta()

    # ----- sampling -----------------------------------------------------------------------------
    def sample(
        self, batch_size: int, *, beta: float = 1.0, window: int | None = None, seed: int | None = None
    ) -> SampleBatch:
        """Draw `batch_size` trajectories (with replacement) in proportion to priority**alpha.

        With `window`, each draw is a window of at most `window` consecutive steps starting uniformly
        inside the trajectory; otherwise the whole trajectory. Raises `ReplayNotReady` while the replay
        is below its minimum size or the sample-to-insert ratio is reached. With `seed`, the draw
        (trajectories and window placement) depends only on the seed and the replay's contents.
        """
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if window is not None and window < 1:
            raise ValueError("window must be >= 1 (or None for whole trajectories)")
        with self._lock:
            total, eligible = self.con.execute(sql.TOTALS).fetchall()[0]
            mean_len = max(1, self.size_steps // max(1, self.episodes))
            self.limiter.check(self.size_steps, batch_size * min(window or mean_len, mean_len))
            if eligible == 0 or total <= 0:
                raise ReplayNotReady(
                    "no trajectory is eligible for sampling (all older than max_policy_lag, or evicted); "
                    "wait for fresh shards or raise max_policy_lag"
                )
            # Every random number comes from this generator (none from DuckDB), so a seed fixes the draw.
            rng = np.random.default_rng(seed) if seed is not None else self._rng
            batch = draw_batch(
                self.con,
                rng,
                batch_size,
                total=total,
                eligible=eligible,
                beta=beta,
                window=window,
                super_size=self.config.super_size,
                block_size=self.config.block_size,
            )
            self.limiter.record_sample(batch.steps.num_rows)
            return batch

    # ----- priorities ---------------------------------------------------------------------------
    def update_priorities(self, slots: np.ndarray, priorities: np.ndarray) -> None:
        """Write priorities from the loss back (one per sampled trajectory; later duplicates win)."""
        slots, priorities = last_priorities(slots, priorities, self.config.min_priority, MAX_PRIORITY)
        with self._lock:
            self.con.register("updates", pa.table({"slot": slots, "priority": priorities}))
            try:
                with sql.transaction(self.con):
                    sql.run_script(self.con, sql.UPDATE_PRIORITIES, self._params())
            finally:
                self.con.unregister("updates")
            self.max_priority = max(self.max_priority, float(priorities.max()))
            self._updates_since_checkpoint += 1
            if self._updates_since_checkpoint >= self.config.checkpoint_every_updates:
                self.try_checkpoint()

    def priorities_of(self, episode_ids: list[str]) -> dict[str, float]:
        """Current raw priority of the given trajectories (those still in the replay)."""
        rows = self.con.execute(sql.PRIORITY_SNAPSHOT).fetchall()
        wanted = set(episode_ids)
        return {e: p for e, p in rows if e in wanted}

    # ----- persistence --------------------------------------------------------------------------
    @property
    def snapshot_path(self) -> str:
        return self.store.path(REPLAY_STATE_DIR, self.config.learner_id, "priorities.parquet")

    def checkpoint(self) -> str:
        """Persist every trajectory's priority (and the counters) to the store."""
        with self._lock:
            write_priority_snapshot(
                self.store,
                self.snapshot_path,
                self.con.sql(sql.PRIORITY_SNAPSHOT).to_arrow_table(),
                max_priority=self.max_priority,
                inserted_steps=self.limiter.inserted,
                sampled_steps=self.limiter.sampled,
                policy_version=self.policy_version,
            )
            self._save_meta()
            self._updates_since_checkpoint = 0
            return self.snapshot_path

    def try_checkpoint(self) -> bool:
        """`checkpoint`, except that a store that cannot take it (a full disk, an outage) costs one
        warning line, not the learner: training goes on and `checkpoint_pending` asks for a retry."""
        try:
            self.checkpoint()
        except store_errors() as exc:
            self.checkpoint_pending, self._updates_since_checkpoint = True, 0
            log.warning(
                "could not checkpoint priorities to %s (%s); training goes on, the checkpoint is retried",
                self.store.url(self.snapshot_path), redact(f"{type(exc).__name__}: {exc}"),
            )  # fmt: skip
            return False
        self.checkpoint_pending = False
        return True

    def _load_priority_snapshot(self) -> None:
        snapshot = read_priority_snapshot(  # a damaged snapshot is set aside (None), with a warning
            self.store,
            self.snapshot_path,
            max_priority=self.max_priority,
            policy_version=self.policy_version,
            max_samples_per_insert=self.config.samples_per_insert,
            error_buffer=self.config.error_buffer_steps,
        )
        if snapshot is None:
            return
        self._restored = snapshot.priorities
        self.max_priority = snapshot.max_priority
        self.policy_version = snapshot.policy_version
        # Inserts are counted again as the shards are re-ingested; samples are not.
        self.limiter.sampled = snapshot.sampled_steps
        restored, url = len(self._restored), self.store.url(self.snapshot_path)
        log.info("restored %d trajectory priorities from %s", restored, url)

    def close(self) -> None:
        with self._lock:
            self._save_meta()
            self.con.close()
            self.limits.close()

    def __enter__(self) -> Replay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
