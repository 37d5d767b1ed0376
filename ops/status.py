"""`distrl status`: policy versions (the warm start, the champion and the newest), per-pool
throughput, replay size and the last evaluation."""

from __future__ import annotations

from storage.registry import CHAMPION, PolicyRegistry
from storage.sql_output import format_table
from storage.sql_views import open_sql
from storage.store import open_store, redact
from tasks.heldout_curve import curve_table, latest_curve_run, read_curve

POOLS_SQL = """
SELECT pool, count(*) AS episodes, printf('%.1f%%', 100 * avg(success)) AS success,
       round(count(*) / greatest(epoch(max(last_step_at) - min(started_at)) / 3600, 1e-9), 1) AS episodes_per_hour,
       max(policy_version) AS newest_version_used
FROM episodes GROUP BY pool ORDER BY pool
"""


def _percent(value: str | float | None) -> str:
    """Every rate in the report the same way: 43.9%."""
    if value is None:
        return "-"
    try:
        return f"{float(value):.1%}"
    except (TypeError, ValueError):
        return "-"


def status_report(store_uri: str | None = None, versions: int = 5) -> str:
    lines = []
    registry = PolicyRegistry()
    champion = registry.resolve(CHAMPION)
    # The curve before the versions' tags: an evaluation tags its version before it adds the curve
    # point, so every version on the curve read here has its held-out tag below (read the other way
    # round, a version scored in between showed "held-out -" above a curve that had it).
    curve = _curve_lines(registry, champion)
    known = registry.versions()
    # A server URI may carry a password (https://user:pw@host): every URI shown goes through redact.
    lines.append(
        f"Policy '{registry.name}' at {redact(registry.settings.tracking_uri)}: {len(known)} versions"
    )
    # One registry query for every version's tags (not one call per version).
    found = registry.client.search_model_versions(f"name = '{registry.name}'")
    all_tags = {int(mv.version): dict(mv.tags) for mv in found}
    warm = [v for v in known if all_tags.get(v, {}).get("warm_start") == "1"][:1]
    shown = sorted(set(known[-versions:]) | set(warm) | ({champion} if champion in known else set()))
    for i, version in enumerate(shown[::-1]):
        if i and shown[::-1][i - 1] - version > 1:
            lines.append("  ...")
        tags = all_tags.get(version, {})
        marks = [
            m
            for m, v in (
                ("latest", known[-1]),
                ("champion", champion),
                ("warm start", warm[0] if warm else None),
            )
            if v == version
        ]
        lines.append(
            f"  v{version:<4} step {tags.get('learner_step', '?'):>6}  samples {tags.get('samples_seen', '-'):>8}  "
            f"replay {tags.get('replay_size', '-'):>8}  held-out {_percent(tags.get('heldout_success')):>6}  "
            f"{', '.join(marks)}"
        )
    store = open_store(store_uri)
    session = open_sql(store)
    try:
        lines += ["", f"Store {redact(store.uri)}", format_table(session.query(POOLS_SQL))]
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
            f"Last evaluation: {runs[0].info.run_name}: held-out success {_percent(metrics.get('heldout_success'))}",
        ]
    lines += curve
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


def _curve_lines(registry: PolicyRegistry, champion: int | None, rows: int = 12) -> list[str]:
    """The newest training run's held-out curve (the continuous evaluator's), last `rows` points."""
    run_id = latest_curve_run(registry)
    if run_id is None:
        return [
            "",
            "Held-out curve: no version scored yet (the evaluator scores each one as it is published)",
        ]
    run = registry.client.get_run(run_id)
    points = read_curve(registry, run_id)
    table = curve_table(points[-rows:], champion)
    headers = list(table[0]) if table else []
    widths = [max(len(h), *(len(r[h]) for r in table)) for h in headers]
    state = "running" if run.info.status == "RUNNING" else "finished"
    lines = ["", f"Held-out curve: {run.info.run_name}, {len(points)} points ({state})"]
    lines.append("  " + "  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)))
    lines += ["  " + "  ".join(r[h].rjust(w) for h, w in zip(headers, widths, strict=True)) for r in table]
    return lines
