"""Mean learning curves with 95 % bands over seeds, and their PNG (matplotlib is optional: a bare
compute machine writes the JSON, and ``python -m bench._curves RESULT.json`` draws it elsewhere)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench._common import save_figure
from bench._stats import t_interval


def mean_curve(runs: list[dict], key: str = "heldout_success") -> dict[str, list]:
    """Seeds aligned by round index (runs stop at slightly different rounds: cut to the shortest):
    x = mean env steps, y = mean of ``key``, band = 95 % t-interval (the mean itself for 1 seed)."""
    length = min(len(r["rounds"]) for r in runs)
    xs, ys, low, high = [], [], [], []
    for k in range(length):
        xs.append(sum(r["rounds"][k]["env_steps"] for r in runs) / len(runs))
        s = t_interval([r["rounds"][k][key] for r in runs])
        ys.append(s["mean"])
        lo, hi = s["ci95"] or (s["mean"], s["mean"])
        low.append(max(0.0, lo))
        high.append(min(1.0, hi))
    return {"env_steps": xs, "mean": ys, "low": low, "high": high}


def plot_curves(document: dict, path: Path, *, key: str = "heldout_success") -> bool:
    """One panel per family, one mean curve and band per method; False (and a note) without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        print(f"matplotlib is not installed: no {path.name}; draw it later with bench/_curves.py", flush=True)
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = list(document["summary"])
    fig, axes = plt.subplots(1, len(families), figsize=(7 * len(families), 4.2), squeeze=False)
    for ax, family in zip(axes[0], families, strict=True):
        by_method: dict[str, list[dict]] = {}
        for run in document["runs"]:
            if run["family"] == family:
                by_method.setdefault(run["method"], []).append(run)
        for method, runs in by_method.items():
            curve = mean_curve(runs, key)
            line = ax.plot(curve["env_steps"], curve["mean"], label=f"{method} ({len(runs)} seeds)")[0]
            ax.fill_between(
                curve["env_steps"], curve["low"], curve["high"], color=line.get_color(), alpha=0.15
            )
        warm = document["summary"][family]["warm_start"]["mean"]
        ax.axhline(warm, color="grey", linestyle=":", label="warm start (mean)")
        ax.set_xlabel("environment steps")
        ax.set_ylabel(f"success on {document['settings']['evaluated_on']} (greedy)")
        ax.set_ylim(0, 1)
        ax.set_title(f"SimDroid {family}: mean over seeds, 95 % band")
        ax.legend(fontsize=8)
    save_figure(fig, path)
    return True


def plot_staleness(document: dict, path: Path) -> None:
    """bench.staleness: final held-out success against the lag k (log scale), one panel per family
    and condition, one line with 95 % bars per method."""
    from bench._common import pyplot

    plt = pyplot()
    panels: dict[tuple[str, str], dict[str, list[tuple[int, dict]]]] = {}
    for key, entry in document["summary"].items():
        family, condition, lag = key.split("/")
        for method, value in entry.items():
            if "_minus_" not in method:
                panels.setdefault((family, condition), {}).setdefault(method, []).append(
                    (int(lag[3:]), value)
                )
    split = "validation" if document["settings"].get("validation") else "held-out"
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    for ax, ((family, condition), methods) in zip(axes[0], panels.items(), strict=True):
        for method, points in methods.items():
            points.sort(key=lambda p: p[0])
            lags = [lag for lag, _ in points]
            means = [v["mean"] for _, v in points]
            low = [v["mean"] - (v["ci95"] or [v["mean"]])[0] for _, v in points]
            high = [(v["ci95"] or [0, v["mean"]])[1] - v["mean"] for _, v in points]
            ax.errorbar(
                lags,
                means,
                yerr=[low, high],
                marker="o",
                capsize=4,
                label=f"{method} ({points[0][1]['n']} seeds)",
            )
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({lag for pts in methods.values() for lag, _ in pts}))
        ax.get_xaxis().set_major_formatter(plt.matplotlib.ticker.ScalarFormatter())
        ax.set_xlabel("policy lag k (versions)")
        ax.set_ylabel(f"final {split} success (mean of last 3 evaluations)")
        ax.set_ylim(0, 1)
        ax.set_title(f"SimDroid {family}, {condition}: mean, 95 % t")
        ax.legend(fontsize=8)
    save_figure(fig, path)


if __name__ == "__main__":
    result = Path(sys.argv[1])
    plot_curves(json.loads(result.read_text()), result.with_suffix(".png"))
