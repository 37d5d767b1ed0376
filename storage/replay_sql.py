"""SQL of the prioritized replay (DuckDB). Every value is a bound `$parameter`, never formatted in.

Layout. Each trajectory (episode) gets a `slot`, assigned in insertion order. Slots are grouped
into fixed blocks of `$B` slots, and blocks into super-blocks of `$S` blocks. A block row holds
its slots' raw priorities `ps`, policy versions `vs` and sampling weights `ws` as lists (position
i <-> slot `block*B + i`), plus their sum. A super-block row holds its blocks' ids and sums.

Multi-statement constants are run one statement at a time (`run_script`), because DuckDB binds
parameters only in single statements.

Sampling (with replacement, exact in proportion to w = p^alpha):
1. pick a super-block by inverse CDF: a running total over the few thousand super-blocks, and
   an ASOF join of uniform draws against it;
2. pick a block inside it by an exponential race over its block sums (argmin of E/w, E ~ Exp(1)
   drawn by the caller, wins with probability w / sum w);
3. pick a slot inside that block by the same race over the block's `ws` list.
Each stage touches only O(draws * (B + S)) values and a few thousand super-block rows, so a batch
costs about the same at 100k and 10M trajectories, and priority updates rewrite only the blocks
they touch.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import duckdb
import numpy as np
import pyarrow as pa

CREATE_TABLES = """
CREATE TABLE IF NOT EXISTS shards (
    path VARCHAR PRIMARY KEY, status VARCHAR, rows BIGINT, episodes BIGINT, reason VARCHAR,
    ingested_at TIMESTAMP DEFAULT current_timestamp);
CREATE TABLE IF NOT EXISTS episodes (
    slot BIGINT, episode_id VARCHAR, shard VARCHAR, n_steps INTEGER, policy_version BIGINT,
    success BOOLEAN, task_id VARCHAR, task_family VARCHAR, pool VARCHAR);
CREATE TABLE IF NOT EXISTS blocks (
    block BIGINT, super BIGINT, base BIGINT, ps DOUBLE[], vs BIGINT[], ws DOUBLE[], wsum DOUBLE, npos BIGINT, min_v BIGINT);
CREATE TABLE IF NOT EXISTS supers (super BIGINT, bids BIGINT[], bsums DOUBLE[], wsum DOUBLE, npos BIGINT);
CREATE TABLE IF NOT EXISTS replay_meta (key VARCHAR PRIMARY KEY, value DOUBLE);
"""

# The sampling weight of one slot: p^alpha while it is fresh enough and not evicted, else 0.
_WEIGHTS = """list_transform(ps, lambda p, i:
    CASE WHEN vs[i] >= $version_cutoff AND base + i - 1 >= $first_slot THEN pow(p, $alpha) ELSE 0 END)"""

_BLOCK_STATS = """
UPDATE blocks SET wsum = list_sum(ws), npos = list_count(list_filter(ws, lambda w: w > 0)),
                  min_v = list_min(vs)
WHERE wsum IS NULL;
"""

# `new_items` (registered Arrow): slot, priority, policy_version — slots contiguous after the old ones.
INSERT_ITEMS = (
    """
UPDATE blocks SET ps = list_concat(blocks.ps, n.ps), vs = list_concat(blocks.vs, n.vs), wsum = NULL
FROM (SELECT slot // $B AS block, list(priority ORDER BY slot) AS ps, list(policy_version ORDER BY slot) AS vs
      FROM new_items GROUP BY 1) n
WHERE blocks.block = n.block;
INSERT INTO blocks (block, super, base, ps, vs)
SELECT slot // $B, slot // $B // $S, slot // $B * $B, list(priority ORDER BY slot), list(policy_version ORDER BY slot)
FROM new_items WHERE slot // $B NOT IN (SELECT block FROM blocks) GROUP BY 1, 2, 3;
UPDATE blocks SET ws = """
    + _WEIGHTS
    + """ WHERE wsum IS NULL;
"""
    + _BLOCK_STATS
)

# `updates` (registered Arrow): slot, priority. One pass: the touched blocks' new lists and sums go
# to a temp table; super-blocks take the difference (before the blocks change, as they need the old
# counts); then the blocks are rewritten. No statement scans more than the blocks table once.
UPDATE_PRIORITIES = (
    """
CREATE OR REPLACE TEMP TABLE changed_blocks AS
SELECT block, super, ps, ws, list_sum(ws) AS wsum, list_count(list_filter(ws, lambda w: w > 0)) AS npos
FROM (
    SELECT block, super, ps, """
    + _WEIGHTS
    + """ AS ws
    FROM (
        SELECT b.block, b.super, b.base, b.vs,
               list_transform(b.ps, lambda p, i: coalesce(u.m[b.base + i - 1], p)) AS ps
        FROM blocks b
        JOIN (SELECT slot // $B AS block, map(list(slot), list(priority)) AS m FROM updates GROUP BY 1) u
          ON b.block = u.block));
UPDATE supers SET
    bsums = list_transform(supers.bids, lambda b, i: coalesce(d.m[b], supers.bsums[i])),
    wsum = list_sum(list_transform(supers.bids, lambda b, i: coalesce(d.m[b], supers.bsums[i]))),
    npos = supers.npos + d.dn
FROM (SELECT c.super, map(list(c.block), list(c.wsum)) AS m, sum(c.npos) - sum(b.npos) AS dn
      FROM changed_blocks c JOIN blocks b USING (block) GROUP BY 1) d
WHERE supers.super = d.super;
UPDATE blocks SET ps = c.ps, ws = c.ws, wsum = c.wsum, npos = c.npos
FROM changed_blocks c WHERE blocks.block = c.block;
DROP TABLE changed_blocks;
"""
)

# Re-derive weights of blocks that may hold newly stale or evicted slots.
REWEIGHT_STALE = (
    """
UPDATE blocks SET wsum = NULL WHERE npos > 0 AND (min_v < $version_cutoff OR block * $B < $first_slot);
UPDATE blocks SET ws = """
    + _WEIGHTS
    + """ WHERE wsum IS NULL;
"""
    + _BLOCK_STATS
)

DROP_EVICTED_BLOCKS = "DELETE FROM blocks WHERE (block + 1) * $B <= $first_slot;"

# Super-blocks are small; rebuild the touched ones (or all, after a bulk change) from their blocks.
REBUILD_SUPERS = """
DELETE FROM supers WHERE super IN (SELECT unnest($supers::BIGINT[]));
INSERT INTO supers
SELECT super, list(block ORDER BY block), list(wsum ORDER BY block), sum(wsum), sum(npos)
FROM blocks WHERE super IN (SELECT unnest($supers::BIGINT[])) GROUP BY super;
"""

REBUILD_ALL_SUPERS = """
DELETE FROM supers;
INSERT INTO supers
SELECT super, list(block ORDER BY block), list(wsum ORDER BY block), sum(wsum), sum(npos)
FROM blocks GROUP BY super;
"""

TOTALS = "SELECT coalesce(sum(wsum), 0), coalesce(sum(npos), 0) FROM supers WHERE wsum > 0"

# Prepared once per connection (planning is a third of the cost at 100k trajectories). Reads the
# registered table `sample_draws(k, r, e2, e3)`: one row per draw, r ~ U[0, 1) and the Exp(1)
# variables of its two races (e2: one per block of a super-block, e3: one per slot of a block), all
# from the caller's generator, so that a seeded generator gives the same draws on any thread count.
SAMPLE = """
WITH cum AS (
    SELECT bids, bsums, sum(wsum) OVER (ORDER BY super) AS cend, sum(wsum) OVER () AS total
    FROM supers WHERE wsum > 0),
total AS (SELECT max(total) AS t FROM cum),
stage1 AS (SELECT d.k, d.e2, d.e3, cum.bids, cum.bsums
           FROM sample_draws d CROSS JOIN total ASOF JOIN cum ON least(d.r * total.t, total.t) <= cum.cend),
stage2 AS (
    SELECT k, e3, bids[list_position(keys, list_min(keys))] AS block
    FROM (SELECT k, e3, bids, list_transform(bsums, lambda w, i: e2[i] / w) AS keys FROM stage1)),
stage3 AS (
    SELECT s.k, b.base, b.ws, list_transform(b.ws, lambda w, i: s.e3[i] / w) AS keys
    FROM stage2 s JOIN blocks b ON b.block = s.block)
SELECT k, base + list_position(keys, list_min(keys)) - 1 AS slot, ws[list_position(keys, list_min(keys))] AS w
FROM stage3 ORDER BY k
"""

# Reads the registered table `picks(sample_idx, slot, u, win)`: the drawn slots, a uniform number
# that places each window, and the window length (NULL: the whole trajectory).
FETCH_STEPS = """
WITH placed AS (
    SELECT p.sample_idx, p.slot, e.n_steps,
           CASE WHEN p.win IS NULL THEN 0
                ELSE floor(p.u * greatest(e.n_steps - p.win + 1, 1))::BIGINT END AS start,
           p.win
    FROM picks p JOIN episodes e USING (slot))
SELECT p.sample_idx, p.start AS window_start, s.* EXCLUDE (slot)
FROM placed p JOIN steps s
  ON s.slot = p.slot AND s.step >= p.start AND s.step < p.start + coalesce(p.win, p.n_steps)
ORDER BY p.sample_idx, s.step
"""

# Naive reference used by the benchmark: one exponential race over every row of a flat table.
SAMPLE_FULL_SCAN = """
SELECT slot FROM flat_items WHERE w > 0 ORDER BY -ln(1 - random()) / w LIMIT $n
"""

# The trainable episodes of a registered shard (`shard_steps`, with its row number `__row`) that are
# not in the replay yet, one row each, in the shard's order.
# `shard_steps` (registered Arrow): a batch of shards' rows, `__shard` its shard's place in the batch
# and `__row` its place in the whole batch. An episode found in several shards of a batch is taken
# from the first of them where it qualifies, as ingesting the shards one by one would.
NEW_EPISODES = """
SELECT episode_id, __shard, count(*)::INTEGER AS n_steps, min(policy_version) AS policy_version,
       bool_or(episode_success) AS success, any_value(task_id) AS task_id,
       any_value(task_family) AS task_family, any_value(pool) AS pool, min(__row) AS first_row
FROM shard_steps
GROUP BY episode_id, __shard
HAVING bool_and(episode_status = 'ok') AND min(policy_version) >= $version_cutoff
   AND episode_id NOT IN (SELECT episode_id FROM episodes)
QUALIFY row_number() OVER (PARTITION BY episode_id ORDER BY __shard) = 1
ORDER BY first_row
"""

EVICTION_CUTOFF = """
SELECT min(slot) FROM (
    SELECT slot, sum(n_steps) OVER (ORDER BY slot DESC ROWS UNBOUNDED PRECEDING) AS newer_steps FROM episodes)
WHERE newer_steps <= $capacity
"""

PRIORITY_SNAPSHOT = """
SELECT e.episode_id, p.priority
FROM (SELECT base + generate_subscripts(ps, 1) - 1 AS slot, unnest(ps) AS priority FROM blocks) p
JOIN episodes e USING (slot)
"""


EVICT = "DELETE FROM steps WHERE slot < $cut; DELETE FROM episodes WHERE slot < $cut;"
CREATE_STEPS = "CREATE TABLE IF NOT EXISTS steps AS SELECT *, NULL::BIGINT AS slot FROM step_schema"
STEPS_HELD = "SELECT coalesce(sum(n_steps), 0) FROM episodes"
SAVE_META = "INSERT OR REPLACE INTO replay_meta VALUES (?, ?)"
# A batch of shards goes in: the new episodes (`new_items`), their steps (`shard_steps`), the shards.
INSERT_EPISODES = """INSERT INTO episodes SELECT slot, episode_id, shard, n_steps, policy_version, success,
   task_id, task_family, pool FROM new_items"""
INSERT_STEPS = (
    "INSERT INTO steps SELECT s.* EXCLUDE (__row, __shard), n.slot "
    "FROM shard_steps s JOIN new_items n USING (episode_id, __shard)"
)
RECORD_INGESTED_SHARDS = (
    "INSERT OR REPLACE INTO shards (path, status, rows, episodes) "
    "SELECT path, 'ingested', rows, episodes FROM batch_shards"
)
RECORD_QUARANTINED_SHARD = "INSERT OR REPLACE INTO shards (path, status, reason) VALUES (?, 'quarantined', ?)"


def prepare(con: duckdb.DuckDBPyConnection, *, fetch: bool = True) -> None:
    """Prepare SAMPLE (and FETCH_STEPS) on `con`; placeholders for their input tables let them bind."""
    con.register("sample_draws", _draws(np.empty(0), np.empty((0, 1)), np.empty((0, 1))))
    picks = {"sample_idx": pa.int64(), "slot": pa.int64(), "u": pa.float64(), "win": pa.int64()}
    con.register("picks", pa.table({name: pa.array([], type_) for name, type_ in picks.items()}))
    con.execute(f"PREPARE replay_sample AS {SAMPLE}")
    if fetch:
        con.execute(f"PREPARE replay_fetch AS {FETCH_STEPS}")
    con.unregister("sample_draws")
    con.unregister("picks")


def _draws(r: np.ndarray, e2: np.ndarray, e3: np.ndarray) -> pa.Table:
    def lists(values: np.ndarray) -> pa.Array:
        return pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()), values.shape[1]).cast(
            pa.list_(pa.float64())
        )

    return pa.table({"k": np.arange(len(r), dtype=np.int64), "r": r, "e2": lists(e2), "e3": lists(e3)})


def sample_slots(
    con: duckdb.DuckDBPyConnection, rng: np.random.Generator, n: int, *, super_size: int, block_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Run the prepared sampler for `n` draws, every random number taken from `rng`.

    Returns (slots, weights w = p^alpha). Same generator state and same replay contents: same slots.
    """
    draws = _draws(
        rng.random(n), rng.exponential(size=(n, super_size)), rng.exponential(size=(n, block_size))
    )
    con.register("sample_draws", draws)
    try:
        drawn = con.execute("EXECUTE replay_sample").fetchnumpy()
    finally:
        con.unregister("sample_draws")
    return drawn["slot"].astype(np.int64), drawn["w"].astype(np.float64)


def run_script(
    con: duckdb.DuckDBPyConnection, script: str, params: Mapping[str, object] | None = None
) -> None:
    """Run each `;`-separated statement, binding only the `$parameters` that statement uses."""
    params = params or {}
    for statement in (part.strip() for part in script.split(";")):
        if not statement:
            continue
        used = set(_PARAM.findall(statement))
        missing = used - params.keys()
        if missing:
            raise KeyError(f"SQL parameter(s) {sorted(missing)} not provided")
        con.execute(statement, {k: params[k] for k in used} if used else None)


def rebuild_supers(con: duckdb.DuckDBPyConnection, supers: list[int] | None) -> None:
    """Rebuild the given super-blocks from their blocks (None: all of them; none for an empty list)."""
    if supers is None:
        run_script(con, REBUILD_ALL_SUPERS)
    elif supers:
        run_script(con, REBUILD_SUPERS, {"supers": sorted(set(supers))})


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    con.execute("BEGIN")
    try:
        yield
    except Exception:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def query(con: duckdb.DuckDBPyConnection, statement: str, params: Mapping[str, object] | None = None):
    """A relation for one statement, with only the parameters it uses bound."""
    used = set(_PARAM.findall(statement))
    return con.sql(statement, params={k: (params or {})[k] for k in used} if used else None)


_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
