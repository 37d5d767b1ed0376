"""bench.pretrained runs over several seeds, the tiny default and the pretrained base paired by seed:
final held-out General success, RL updates and SFT updates per model, each model's mean with its
95 % t-interval and the per-seed difference (pretrained − tiny) with its interval. Reads any number
of bench.pretrained result files (each may hold one model or both); the seed is the run's
``--seed``. Writes bench/results/<out>.{json,png}.

    python -m bench.pretrained_seeds bench/results/pretrained_gpu_minilm.json \\
        bench/results/pretrained_gpu_seeds/*.json --out pretrained_gpu_minilm_seeds
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench._common import RESULTS, print_table, pyplot, save_figure, write_result
from bench._stats import fmt_interval, t_interval

MODELS = ("tiny", "pretrained")


def runs_by_seed(paths: list[Path]) -> dict[int, dict[str, dict[str, Any]]]:
    """{seed: {model: that run's result, with its file and the file's machine facts}}."""
    runs: dict[int, dict[str, dict[str, Any]]] = {}
    for path in paths:
        document = json.loads(path.read_text())
        seed = int(document["args"]["seed"])
        for result in document["results"]:
            if result["model"] in runs.setdefault(seed, {}):
                raise SystemExit(f"{path}: seed {seed} has a second {result['model']} run; pass one")
            runs[seed][result["model"]] = result | {"file": str(path), "machine": document["machine"]}
    return runs


def summarise(runs: dict[int, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    paired = sorted(seed for seed, models in runs.items() if set(MODELS) <= set(models))
    if len(paired) < 2:
        raise SystemExit(f"need both models on >= 2 seeds to pair, have {paired}")
    rows = [
        {
            "seed": seed,
            **{f"{m}_heldout": runs[seed][m]["final_heldout_success"] for m in MODELS},
            **{f"{m}_rl_updates": runs[seed][m]["rl_updates"] for m in MODELS},
            **{f"{m}_sft_updates": runs[seed][m]["warm_start"]["updates"] for m in MODELS},
            "difference": runs[seed]["pretrained"]["final_heldout_success"]
            - runs[seed]["tiny"]["final_heldout_success"],
            "files": sorted({runs[seed][m]["file"] for m in MODELS}),
        }
        for seed in paired
    ]
    return {
        "seeds": rows,
        "summary": {
            **{m: t_interval([r[f"{m}_heldout"] for r in rows]) for m in MODELS},
            "difference": t_interval([r["difference"] for r in rows]),
        },
        "base": runs[paired[0]]["pretrained"]["base"],
        "device": runs[paired[0]]["tiny"].get("device"),
    }


def plot(document: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    fig, axis = plt.subplots(figsize=(6, 4))
    for row in document["seeds"]:
        axis.plot([0, 1], [row["tiny_heldout"], row["pretrained_heldout"]], marker="o", color="grey")
        axis.annotate(f"seed {row['seed']}", (1.02, row["pretrained_heldout"]), fontsize=8)
    axis.set_xticks([0, 1], ["tiny default", f"pretrained {Path(document['base']).name}"])
    axis.set_xlim(-0.3, 1.4)
    axis.set_ylabel("final held-out General success (greedy)")
    axis.set_title(f"bench.pretrained on {document['device']}, paired by seed")
    save_figure(fig, path)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("results", nargs="+", type=Path, help="bench.pretrained result files")
    parser.add_argument("--out", default="pretrained_gpu_minilm_seeds")
    args = parser.parse_args()
    document = summarise(runs_by_seed(args.results))
    print_table(
        ["seed", "tiny", "pretrained", "difference", "RL updates tiny / pretrained"],
        [
            [r["seed"], f"{r['tiny_heldout']:.2f}", f"{r['pretrained_heldout']:.2f}", f"{r['difference']:+.2f}",
             f"{r['tiny_rl_updates']} / {r['pretrained_rl_updates']}"]
            for r in document["seeds"]
        ],
    )  # fmt: skip
    for name, summary in document["summary"].items():
        print(f"{name}: {fmt_interval(summary)}")
    out = write_result(args.out, document)
    plot(document, (RESULTS / args.out if "/" not in args.out else Path(args.out)).with_suffix(".png"))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
