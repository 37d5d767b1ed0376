"""`distrl demo` / `make demo`: the embedded training run with a report a person can read.

Warm start on noisy expert demonstrations, then asynchronous A-RIDE with several collectors and
the learner in one process; a held-out evaluation before and after, a learning-curve PNG, and
where everything was written. It starts from an empty `.distrl/demo` each time.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ops.embedded import configure_embedded

# What each validation selection holds out (simulators.simdroid.tasks), for the demo's first lines.
HELD_OUT_MEANING = {
    "validation_words": "train templates with words no fit task has",
    "validation_unseen": "train tasks phrased by a held-out template, each with a held-out app, query, "
    "time or setting",
}
_FAMILY_NAMES: dict[str | None, str] = {
    "general": "General",
    "webshop": "Web Shopping",
    None: "General and Web Shopping",
}

if TYPE_CHECKING:  # imported for real after configure_embedded: Prefect reads its settings on import
    from flows.train_local_params import TrainLocalParams


def run_demo(params: TrainLocalParams | None = None, root: str = ".distrl/demo") -> dict:
    """Run the demo with `params` (the defaults of `TrainLocalParams` when None) under `root`."""
    root_path = Path(root).resolve()
    shutil.rmtree(root_path, ignore_errors=True)  # the demo owns this folder: start from scratch
    configure_embedded(root_path, quiet=True)
    store = Path(os.environ["DISTRL_STORE_URI"])
    if store.resolve() != root_path / "store":
        # Prefect, MLflow and the store read their settings once per process, from the environment:
        # a second demo in the same process would silently resume the first one's registry.
        print(
            f"warning: this process already uses the store {store} (DISTRL_STORE_URI); the demo in "
            f"{root_path} will read and write there. Run each demo in its own process (distrl demo)."
        )

    import torch

    torch.set_num_threads(1)  # 2 cores shared by the learner and collectors: 1 thread each is fastest

    from flows.train_local import train_local
    from flows.train_local_params import TrainLocalParams, heldout_split, trained_split
    from tasks.evaluation import report_markdown

    if params is None:
        params = TrainLocalParams()
    minutes, seed = params.minutes, params.seed
    heldout, trained = heldout_split(params), trained_split(params)
    print(
        f"DistRL demo (seed {seed}): warm start, then {minutes:g} min of {'synchronous' if params.sync else 'asynchronous'} A-RIDE "
        f"with {params.collectors} collectors on SimDroid ({_FAMILY_NAMES[params.family]} tasks). Everything goes to {root_path}."
    )
    if params.validation:
        print(
            f"Validation mode: trained on the {trained!r} tasks, held-out scores on {heldout!r} "
            f"({HELD_OUT_MEANING.get(heldout, 'a selection of train')}); the test split is never loaded."
        )
    started = time.monotonic()
    from distrl_core.policy.config import policy_config_for
    from distrl_core.policy.defaults import describe_defaults

    policy = policy_config_for(params.base, seed, trained, params.encoder_layers, params.encoder_candidates)
    print(f"Policy: {describe_defaults(policy)}")
    result = train_local(params)
    elapsed = time.monotonic() - started
    warm, final = result["warm_start"], result["final"]
    print()
    print(report_markdown(final, baseline=warm))
    curve = result.get("heldout_curve") or []
    if curve:
        print("\nHeld-out success as versions were published (the continuous evaluator):")
        print(curve_text(curve))
    plot = write_learning_curve(result, root_path / "learning_curve.png")
    summary = {
        "seed": seed,
        "minutes_rl": minutes,
        "minutes_total": round(elapsed / 60, 2),
        "heldout_split": heldout,
        "trained_split": trained,
        "heldout_success_warm_start": warm["success"],
        "heldout_ci_warm_start": [warm["ci_low"], warm["ci_high"]],
        "heldout_success_final": final["success"],
        "heldout_ci_final": [final["ci_low"], final["ci_high"]],
        "heldout_episodes": final["episodes"],
        "in_distribution_warm_start": warm.get("in_distribution", {}).get("success"),
        "in_distribution_final": final.get("in_distribution", {}).get("success"),
        "final_version": final["version"],
        "base": params.base,
        # what else sets a run apart from its neighbours in a comparison (docs/performance.md pairs them)
        "observation": params.observation,
        "paraphrase": params.paraphrase,
        # per-task success, for where held-out success goes (bench/heldout_words.py)
        "heldout_tasks_warm_start": warm.get("tasks"),
        "heldout_tasks_final": final.get("tasks"),
        "heldout_curve": curve,
        "evaluator": result.get("evaluator"),
        "learner": result.get("learner"),
    }
    (root_path / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    from storage.registry import PolicyRegistry
    from tasks.mlflow_ui import experiment_url, local_ui_command

    db = f"sqlite:///{root_path / 'mlflow.db'}"
    print(f"""
Held-out success ({heldout} split): warm start {_fmt(warm)} -> final {_fmt(final)} (v{final["version"]}, seed {seed})
Trained tasks ({trained}), fresh seeds: {_fmt(warm.get("in_distribution"))} -> {_fmt(final.get("in_distribution"))}
Learning curve:   {plot}
Shards:           {root_path / "store" / "trajectories"}
MLflow:           {db}; `{local_ui_command(db)}`, then {experiment_url(db, PolicyRegistry().experiment_id())}
SQL:              DISTRL_STORE_URI={root_path / "store"} distrl sql "SELECT policy_version, count(*), avg(success) FROM episodes GROUP BY 1 ORDER BY 1"
""")
    return summary


def curve_text(curve: list[dict]) -> str:
    """The held-out curve as a small table: minutes, env steps, version, success [95% CI]."""
    lines = ["  minutes  env steps  version  held-out success [95% CI]"]
    lines += [
        f"  {p['seconds'] / 60:7.1f}  {p['env_steps']:9d}  {'v' + str(p['version']):>7}  "
        f"{p['success']:6.1%} [{p['ci_low']:.1%}-{p['ci_high']:.1%}]"
        for p in curve
    ]
    return "\n".join(lines)


def _fmt(item: dict | None) -> str:
    if not item:
        return "n/a"
    return f"{item['success']:.1%} [{item['ci_low']:.1%}-{item['ci_high']:.1%}]"


def write_learning_curve(result: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    history = result.get("history", [])
    fig, ax = plt.subplots(figsize=(8, 4.5))
    if history:
        minutes = [h["seconds"] / 60 for h in history]
        ax.plot(
            minutes,
            [h["rolling_success"] for h in history],
            label="collectors: rolling success (train tasks)",
        )
        ax2 = ax.twinx()
        ax2.step(minutes, [h["policy_version"] for h in history], where="post", color="grey", alpha=0.5)
        ax2.set_ylabel("policy version", color="grey")
    curve = result.get("heldout_curve") or []
    if curve:  # the continuous evaluator: each version at the time the learner published it
        xs = [p["seconds"] / 60 for p in curve]
        ys = [p["success"] for p in curve]
        ax.fill_between(
            xs, [p["ci_low"] for p in curve], [p["ci_high"] for p in curve], alpha=0.2, step="post"
        )
        ax.step(xs, ys, where="post", marker="o", color="C1", label="held-out success (95% CI), per version")
    else:
        end = history[-1]["seconds"] / 60 if history else 1.0
        for label, item, x in (("warm start", result["warm_start"], 0.0), ("final", result["final"], end)):
            ax.errorbar(
                [x],
                [item["success"]],
                yerr=[[item["success"] - item["ci_low"]], [item["ci_high"] - item["success"]]],
                fmt="o",
                capsize=4,
                label=f"held-out success: {label} (v{item['version']})",
            )
    ax.set_xlabel("minutes of RL (since the learner started)")
    ax.set_ylabel("success rate")
    ax.set_ylim(0, 1)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("DistRL demo: A-RIDE on SimDroid")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
