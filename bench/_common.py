"""Helpers shared by the pipeline benchmarks (async vs sync, scaling, policy propagation).

They run the real embedded pipeline (Prefect flow runs, SimDroid with sleeping emulator latency,
Parquet shards, the DuckDB replay, MLflow on SQLite) from a folder under `.distrl/bench/`, and read
what happened back from the store with SQL, so every figure comes from the rows the run wrote.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"

# The latency model behind `step_latency_s` / `task_latency_sigma` (simulators.simdroid.faults
# FaultModel.new_episode), written into every result.
LATENCY_MODEL = (
    "each episode draws a factor F ~ lognormal(0, task_latency_sigma); each input action then sleeps "
    "step_latency_s * F * lognormal(0, 0.6), times Pareto(alpha=1.5) with probability 0.05 (an emulator "
    "hang), capped at 50x step_latency_s * F. Observation and acting time come on top (real CPU)."
)


def prepare(root: Path, *, fresh: bool = True) -> Path:
    """A fresh bench folder (or, with `fresh` False, the existing one of a coordinating process);
    Prefect's home beside it. Must run before Prefect or MLflow are imported."""
    if fresh:
        shutil.rmtree(root, ignore_errors=True)
    from ops.embedded import configure_embedded

    # One Prefect home for all benches: its database is created once (slow on a loaded machine).
    os.environ.setdefault("PREFECT_HOME", str(root.parent / "prefect"))
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    configure_embedded(root, quiet=True)
    os.environ["PREFECT_LOGGING_LEVEL"] = "ERROR"
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one "Loading weights" bar per policy load otherwise
    import torch

    torch.set_num_threads(1)  # 2 cores shared by the learner and the collectors: 1 thread each
    return root


def use_store(folder: Path) -> None:
    """Point the store, MLflow and the policy cache at `folder` (settings are read per use)."""
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["DISTRL_STORE_URI"] = str(folder / "store")
    os.environ["DISTRL_MLFLOW_TRACKING_URI"] = f"sqlite:///{folder / 'mlflow.db'}"
    os.environ["DISTRL_MLFLOW_CACHE_DIR"] = str(folder / "policy-cache")


def machine() -> dict:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
        dirty = bool(
            subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True).stdout.strip()
        )
    except OSError:
        commit, dirty = None, None
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "torch_threads": 1,
        "loadavg_1_5_15": [round(x, 2) for x in os.getloadavg()],
        "git_commit": commit,
        "git_dirty": dirty,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def publish_warm_start(updates: int, seed: int = 0) -> int:
    """The same warm-started version for every run of a bench (deterministic on one thread)."""
    from simulators.warm_start import WarmStartConfig
    from tasks.warm_start import warm_start_policy

    return warm_start_policy.fn(WarmStartConfig(family="general", updates=updates, seed=seed))


def episodes_in_window(t0: float, t1: float, *, started_inside: bool = True) -> list[dict]:
    """Episodes of the current store that ended within [t0, t1] (epoch seconds) and, unless
    `started_inside` is False, started there too."""
    from storage.sql_views import open_sql
    from storage.store import open_store

    session = open_sql(open_store())
    try:
        rows = session.query(
            "SELECT episode_id, collector_id, length, status, policy_version, max_policy_version, "
            "epoch(started_at) AS start_s, epoch(started_at) + duration_s AS end_s, duration_s "
            "FROM episodes"
        ).to_pylist()
    finally:
        session.close()
    return [r for r in rows if (r["start_s"] >= t0 or not started_inside) and t0 <= r["end_s"] <= t1]


def steps_in_window(t0: float, t1: float) -> int:
    """Steps of the current store that started within [t0, t1] (epoch seconds)."""
    from storage.sql_views import open_sql
    from storage.store import open_store

    session = open_sql(open_store())
    try:
        table = session.query(
            f"SELECT count(*) AS n FROM steps WHERE epoch(step_started_at) BETWEEN {t0} AND {t1}"
        )
    finally:
        session.close()
    return int(table.to_pylist()[0]["n"])


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in [0, 100]); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def one_thread_cost_document(benchmark: str, batch_steps: int, **fields: object) -> dict:
    """The head of a one-torch-thread cost bench's result (its name, batch, load and time), then
    ``fields``."""
    return {
        "benchmark": benchmark,
        "batch_steps": batch_steps,
        "torch_threads": 1,
        "loadavg_1min": round(os.getloadavg()[0], 2),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **fields,
    }


def write_result(name: str, document: dict) -> Path:
    """bench/results/<name>.json, or <name>.json where <name> is a path (a smoke run's folder)."""
    path = (RESULTS / name if "/" not in name else Path(name)).with_suffix(".json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, default=str))
    return path


def print_table(headers: list[str], rows: list[list[object]]) -> str:
    """A Markdown table (what docs/performance.md shows)."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    lines = [
        "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |",
        "|" + "|".join("-" * (w + 2) for w in widths) + "|",
        *("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in cells),
    ]
    text = "\n".join(lines)
    print(text)
    return text


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: Path) -> None:
    """Write a bench's figure (the same size and resolution for every bench) and free it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def add_pipeline_arguments(parser, *, minutes: float, warm_start_updates: int) -> None:
    """The embedded pipeline's settings that async_run_params reads, shared by the benches."""
    parser.add_argument("--minutes", type=float, default=minutes, help="RL wall-clock budget per run")
    parser.add_argument("--collectors", type=int, default=16)
    parser.add_argument("--step-latency", type=float, default=0.5, help="median step latency (s)")
    parser.add_argument("--task-sigma", type=float, default=1.0, help="per-episode lognormal spread")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--updates-per-block", type=int, default=16)
    parser.add_argument("--publish-every", type=int, default=16)
    parser.add_argument("--min-size-steps", type=int, default=200)
    parser.add_argument("--warm-start-updates", type=int, default=warm_start_updates)


def async_run_params(args, *, sync: bool = False, min_size_steps: int = 200):
    """The `train_local` parameters both pipeline benches run: one emulator per collector, no
    evaluation, no sample-to-insert limit, background ingest (train_local turns it off for sync
    rounds, where ingesting is the barrier)."""
    from flows.train_local import TrainLocalParams
    from storage.replay_config import ReplaySettings
    from tasks.learner import LearnerParams

    return TrainLocalParams(
        collectors=args.collectors,
        envs_per_collector=1,
        minutes=args.minutes,
        family="general",
        sync=sync,
        step_latency_s=args.step_latency,
        task_latency_sigma=args.task_sigma,
        warm_start_updates=args.warm_start_updates,
        evaluate=False,
        learner=LearnerParams(
            batch_size=args.batch_size,
            updates_per_block=args.updates_per_block,
            publish_every_updates=args.publish_every,
            background_ingest=True,
        ),
        replay=ReplaySettings(min_size_steps=min_size_steps, samples_per_insert=None),
        seed=args.seed,
    )
