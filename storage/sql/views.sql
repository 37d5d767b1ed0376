-- Views over the shards' rows (`shard_rows`: one row per step of every shard file, registered from
-- the store's shards, with the file it came from) and their footers' labels (`shard_labels`: shard,
-- host). Episode-level facts are derived here, never stored twice.

-- An episode found in several files (a restored copy of a shard) is counted once, from the first
-- file by name, as the learner's replay keeps one copy.
CREATE OR REPLACE VIEW step_rows AS
SELECT r.* FROM shard_rows r
SEMI JOIN (SELECT episode_id, min(filename) AS filename FROM shard_rows GROUP BY episode_id) f
    ON r.episode_id = f.episode_id AND r.filename = f.filename;

-- The task family is `family` in every view, and `task_family` (the schema's name) too in `steps`
-- and `episodes`, for queries written either way.
-- Shards of schema 1.0 have no `observation`: their steps read the UI dump ('tree').
CREATE OR REPLACE VIEW steps AS
SELECT * EXCLUDE (filename) REPLACE (coalesce(observation, 'tree') AS observation), task_family AS family
FROM step_rows;

CREATE OR REPLACE VIEW episodes AS
SELECT
    episode_id,
    any_value(run_id) AS run_id,
    any_value(pool) AS pool,
    any_value(collector_id) AS collector_id,
    any_value(device_id) AS device_id,
    any_value(env_kind) AS env_kind,
    any_value(task_id) AS task_id,
    any_value(task_family) AS family,
    any_value(task_family) AS task_family,
    any_value(instruction) AS instruction,
    -- 1/0 rather than BOOLEAN so that avg(success) is the success rate
    bool_or(episode_success)::INTEGER AS success,
    any_value(episode_status) AS status,
    count(*) AS length,
    sum(reward) AS "return",
    sum(CASE WHEN action_valid THEN 0 ELSE 1 END) AS invalid_actions,
    any_value(policy_name) AS policy_name,
    min(policy_version) AS policy_version,
    max(policy_version) AS max_policy_version,
    min(step_started_at) AS started_at,
    max(step_started_at) AS last_step_at,
    epoch(max(step_started_at) - min(step_started_at)) + arg_max(step_latency_ms, step) / 1000.0 AS duration_s,
    avg(step_latency_ms) AS mean_step_latency_ms
FROM steps
GROUP BY episode_id;

CREATE OR REPLACE VIEW tasks AS
SELECT
    task_id,
    family,
    any_value(instruction) AS instruction,
    count(*) AS episodes,
    avg(success) AS success_rate,
    avg(length) AS mean_length,
    avg(duration_s) AS mean_duration_s
FROM episodes
WHERE status = 'ok'
GROUP BY task_id, family;

CREATE OR REPLACE VIEW policies AS
SELECT
    s.policy_name,
    s.policy_version,
    count(*) AS steps,
    count(DISTINCT s.episode_id) AS episodes,
    avg(CASE WHEN s.done THEN s.episode_success::INTEGER END) AS success_rate,
    count(DISTINCT s.pool) AS pools,
    min(s.step_started_at) AS first_step_at,
    max(s.step_started_at) AS last_step_at
FROM steps s
GROUP BY s.policy_name, s.policy_version;

-- One row per shard file: which host wrote it (NULL for shards written before the label existed),
-- its collector, and what it holds (a copy's episodes too: this view is about files).
CREATE OR REPLACE VIEW shards AS
SELECT
    r.filename AS shard,
    any_value(l.host) AS host,
    any_value(r.pool) AS pool,
    any_value(r.collector_id) AS collector_id,
    count(DISTINCT r.episode_id) AS episodes,
    count(*) AS steps,
    list(DISTINCT r.policy_version ORDER BY r.policy_version) AS policy_versions,
    min(r.step_started_at) AS first_step_at,
    max(r.step_started_at) AS last_step_at
FROM shard_rows r
LEFT JOIN shard_labels l ON l.shard = r.filename
GROUP BY r.filename;
