"""`distrl status`: policy versions, per-pool throughput, replay size and the last evaluation."""

from __future__ import annotations

from storage.registry import CHAMPION, PolicyRegistry
from storage.sql_output import format_table
from storage.sql_views import open_sql
from storage.store import open_store

POOLS_SQL = """
SELECT pool, count(*) AS episodes, round(avg(success), 3) AS success_rate,
       round(count(*) / greatest(epoch(max(last_step_at) - min(started_at)) / 3600, 1e-9), 1) AS episodes_per_hour,
       max(policy_version) AS newest_version_used
FROM episodes GROUP BY pool ORDER BY pool
"""


def status_report(store_uri: str | None = None, versions: int = 5) -> str:
    lines = []
    registry = PolicyRegistry()
    known = registry.versions()
    champion = registry.resolve(CHAMPION)
    lines.append(f"Policy '{registry.name}' at {registry.settings.tracking_uri}: {len(known)} versions")
    for version in known[-versions:][::-1]:
        tags = registry.tags(version)
        marks = [m for m, v in (("latest", known[-1]), ("champion", champion)) if v == version]
        lines.append(
            f"  v{version:<4} step {tags.get('learner_step', '?'):>6}  samples {tags.get('samples_seen', '-'):>8}  "
            f"replay {tags.get('replay_size', '-'):>8}  held-out {tags.get('heldout_success', '-'):>8}  {' '.join(marks)}"
        )
    store = open_store(store_uri)
    session = open_sql(store)
    try:
        lines += ["", f"Store {store.uri}", format_table(session.query(POOLS_SQL))]
    finally:
        session.close()
    runs = registry.client.search_runs(
        [registry.experiment_id()],
        "tags.role = 'evaluation'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    if runs:
        metrics = runs[0].data.metrics
        lines += [
            "",
            f"Last evaluation: {runs[0].info.run_name}: held-out success {metrics.get('heldout_success', float('nan')):.1%}",
        ]
    learners = registry.client.search_runs(
        [registry.experiment_id()],
        "tags.role = 'learner'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    if learners:
        metrics = learners[0].data.metrics
        lines.append(
            f"Learner {learners[0].info.run_name}: replay {metrics.get('replay_steps', 0):.0f} steps, "
            f"{metrics.get('learner_updates_total', 0):.0f} updates, duty cycle {metrics.get('learner_duty_cycle', 0):.0%}"
        )
    return "\n".join(lines)
