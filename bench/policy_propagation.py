"""Policy propagation: from a version's `publish` to the first episode acting with it.

Runs asynchronous `train_local` (the learner publishes every K updates while the collectors run;
collectors poll the registry between episodes) and then joins the registry with the shards:

- publish time: the MLflow model version's creation timestamp (the moment `latest` resolves to it);
- first use: the earliest `step_started_at` of a step whose `policy_version` is that version
  (`exact`), or that version or a newer one (`at_least`: a version published while every collector
  was mid-episode may be skipped for the next one, which is propagation too);
- per collector: for each collector and version, the first step with that version or newer.

    .venv/bin/python -m bench.policy_propagation [--minutes 3] [--collectors 16] [--step-latency 0.5]
        [--from-folder DIR]   # analyse an existing run's store + mlflow.db instead of running
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench._common import (
    LATENCY_MODEL,
    async_run_params,
    machine,
    percentile,
    prepare,
    print_table,
    pyplot,
    save_figure,
    use_store,
    write_result,
)


def run(args: argparse.Namespace, folder: Path) -> dict:
    from flows.train_local import train_local

    use_store(folder)
    params = async_run_params(args)
    result = train_local(params, show_progress=False)
    return {"published": result["learner"]["published"], "updates": result["learner"]["updates"]}


def analyse(folder: Path) -> dict:
    from storage.registry import PolicyRegistry
    from storage.sql_views import open_sql
    from storage.store import open_store

    use_store(folder)
    registry = PolicyRegistry()
    versions = registry.client.search_model_versions(f"name = '{registry.name}'")
    published = {
        int(v.version): v.creation_timestamp / 1000.0
        for v in versions
        if registry.tags(int(v.version)).get("warm_start") != "1"
    }
    session = open_sql(open_store())
    try:
        firsts = session.query(
            "SELECT collector_id, policy_version, min(epoch(step_started_at)) AS first_s "
            "FROM steps GROUP BY 1, 2"
        ).to_pylist()
        run_end = session.query("SELECT max(epoch(step_started_at)) AS t FROM steps").to_pylist()[0]["t"]
    finally:
        session.close()
    per_version: dict[int, dict] = {}
    per_collector_lags: list[float] = []
    collectors = sorted({r["collector_id"] for r in firsts})
    for version, at in sorted(published.items()):
        exact = [r["first_s"] for r in firsts if r["policy_version"] == version]
        newer = [r for r in firsts if r["policy_version"] >= version]
        if not newer:  # published after the last episode started: nobody could use it
            continue
        per_version[version] = {
            "published_at": at,
            "exact_lag_s": (min(exact) - at) if exact else None,
            "at_least_lag_s": min(r["first_s"] for r in newer) - at,
            "collectors_using_exactly": len(exact),
        }
        for collector in collectors:
            mine = [r["first_s"] for r in newer if r["collector_id"] == collector]
            if mine:
                per_collector_lags.append(min(mine) - at)
    exact = [v["exact_lag_s"] for v in per_version.values() if v["exact_lag_s"] is not None]
    at_least = [v["at_least_lag_s"] for v in per_version.values()]

    def stats(values: list[float]) -> dict:
        return {
            "n": len(values),
            "p50_s": percentile(values, 50),
            "p95_s": percentile(values, 95),
            "max_s": max(values, default=None),
        }

    return {
        "versions_published": len(published),
        "versions_measured": len(per_version),
        "versions_never_used_exactly": len(per_version) - len(exact),
        "first_use_exact": stats(exact),
        "first_use_at_least": stats(at_least),
        "per_collector_adoption": stats(per_collector_lags),
        "per_version": per_version,
        "last_step_at": run_end,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--collectors", type=int, default=16)
    parser.add_argument("--step-latency", type=float, default=0.5, help="median step latency (s)")
    parser.add_argument("--task-sigma", type=float, default=1.0, help="per-episode lognormal spread")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--updates-per-block", type=int, default=4)
    parser.add_argument("--publish-every", type=int, default=4, help="publish often: >= 10 versions")
    parser.add_argument("--warm-start-updates", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--root", default=".distrl/bench/policy_propagation")
    parser.add_argument("--from-folder", default=None, help="analyse this run folder instead of running")
    parser.add_argument("--out", default="policy_propagation")
    args = parser.parse_args()
    started = time.monotonic()
    before = machine()
    if args.from_folder:
        folder, ran = Path(args.from_folder).resolve(), None
    else:
        root = prepare(Path(args.root).resolve())
        folder = root / "run"
        ran = run(args, folder)
    result = analyse(folder)
    document = {
        "benchmark": "policy_propagation",
        "machine": before,
        "loadavg_after": machine()["loadavg_1_5_15"],
        "settings": vars(args)
        | {"envs_per_collector": 1, "episodes_per_batch": 1, "poll": "between episodes"},
        "latency_model": LATENCY_MODEL,
        "run": ran,
        **result,
        "targets": {"first_use p50 <= 5 s": (result["first_use_at_least"]["p50_s"] or 1e9) <= 5.0},
        "total_wall_s": round(time.monotonic() - started, 1),
    }

    def fmt(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    document["table"] = print_table(
        ["measure", "versions / pairs", "p50 (s)", "p95 (s)", "max (s)"],
        [
            [name, s["n"], fmt(s["p50_s"]), fmt(s["p95_s"]), fmt(s["max_s"])]
            for name, s in (
                ("publish -> first episode with it or newer", result["first_use_at_least"]),
                ("publish -> first episode with exactly it", result["first_use_exact"]),
                ("publish -> each collector adopts it (or newer)", result["per_collector_adoption"]),
            )
        ],
    )
    path = write_result(args.out, document)
    plot(document, path.with_suffix(".png"))
    print(json.dumps({k: v for k, v in document.items() if k not in ("per_version", "table")}, indent=2))
    print(f"wrote {path} and {path.with_suffix('.png')}")


def plot(document: dict, path: Path) -> None:
    plt = pyplot()
    per_version = document["per_version"]
    versions = [int(v) for v in per_version]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(
        versions, [per_version[v]["at_least_lag_s"] for v in per_version], marker="o", label="it or newer"
    )
    exact = [(int(v), r["exact_lag_s"]) for v, r in per_version.items() if r["exact_lag_s"] is not None]
    ax.plot([v for v, _ in exact], [lag for _, lag in exact], marker="x", linestyle="", label="exactly it")
    ax.axhline(5.0, color="grey", linestyle=":", label="target p50 5 s")
    ax.set_xlabel("policy version")
    ax.set_ylabel("seconds from publish to first episode")
    ax.set_title("Policy propagation to the collectors", fontsize=10)
    ax.legend()
    save_figure(fig, path)


if __name__ == "__main__":
    main()
