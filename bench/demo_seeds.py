"""The demo over seeds: `distrl demo --seed s` for each seed, one process after the other (each run
owns the machine, as a user's `make demo` does), and the summary over seeds.

Per seed it keeps the demo's own `summary.json` (held-out success of the warm start and of the last
version with their 95 % Wilson intervals, the continuous evaluator's curve, learner updates); over
seeds the mean gain and final success with 95 % t-intervals, and how many seeds gain at least
``--target`` with disjoint intervals. Writes bench/results/demo_seeds.json (or ``--out``).

    .venv/bin/python -m bench.demo_seeds [--seeds 0 1 2 3 4] [--minutes 6] [--target 0.15]
        [--warm-start-updates 300] [--base minilm | --pretrained] [--encoder-layers K]
        [--encoder-candidates pooled|spans] [--collectors N] [--observation screen] [--paraphrase P] [--validation]
        [--validation-split validation_unseen] [--reuse-kept]

Each seed's summary is kept under ``--root``/<folder>/seed<s>/, the folder named by the settings:
``ws<updates>-<minutes>min`` for the tiny default on test, prefixed by the base (``minilm-``, then
``L<K>-``, ``spans-``/``pooled-``, ``c<N>-`` (collectors) and ``screen-`` where those are set) and
by ``val-`` with ``--validation`` (held-out scores on validation_words, the test split never
loaded; ``val-unseen-`` with ``--validation-split validation_unseen``), so that validation and test
results never mix. With ``--reuse-kept`` a seed already kept
there is read, not run again, so the five seeds can be run in parts across sessions and reported
together. ``--validation`` writes bench/results/demo_seeds_validation.json unless ``--out`` says.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._common import machine, write_result
from bench._stats import fmt_interval, t_interval
from ops.cli_flows import PRETRAINED_BASE


@dataclass(frozen=True)
class DemoSettings:
    """What each seed's `distrl demo` runs with beyond its seed (None: the demo's own default)."""

    minutes: float
    warm_start_updates: int | None = None
    base: str | None = None
    validation: bool = False
    validation_split: str = "validation_words"  # the selection a validation run scores
    encoder_layers: int | None = None  # an encoder base's top layers trained (None: its default)
    encoder_candidates: str | None = None  # "pooled" or "spans" (None: the encoder's default)
    collectors: int | None = None  # collector threads (None: the demo's default)
    observation: str | None = None  # "tree" or "screen" (None: the demo's default, the tree)
    paraphrase: float | None = None  # training instructions rephrased, a probability (None: the demo's)

    def flags(self) -> list[str]:
        """The demo's options beyond --seed and --minutes."""
        flags = (
            [] if self.warm_start_updates is None else ["--warm-start-updates", str(self.warm_start_updates)]
        )
        flags += [] if self.base is None else ["--base", self.base]
        flags += [] if self.encoder_layers is None else ["--encoder-layers", str(self.encoder_layers)]
        flags += [] if self.encoder_candidates is None else ["--encoder-candidates", self.encoder_candidates]
        flags += [] if self.collectors is None else ["--collectors", str(self.collectors)]
        flags += [] if self.observation is None else ["--observation", self.observation]
        flags += [] if self.paraphrase is None else ["--paraphrase", f"{self.paraphrase:g}"]
        if not self.validation:
            return flags
        other = self.validation_split != "validation_words"
        return [*flags, "--validation", *(["--validation-split", self.validation_split] if other else [])]

    def argv(self, seed: int) -> list[str]:
        """The demo's command line for `seed`."""
        demo = [sys.executable, "-m", "ops.cli", "demo"]
        return [*demo, "--seed", str(seed), "--minutes", f"{self.minutes:g}", *self.flags()]

    @property
    def heldout_split(self) -> str:
        return self.validation_split if self.validation else "test"

    def folder(self) -> str:
        """The kept runs' folder name: one per setting, validation apart from test."""
        base = "" if self.base is None else re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(self.base).name) + "-"
        base += "" if self.encoder_layers is None else f"L{self.encoder_layers}-"
        base += "" if self.encoder_candidates is None else f"{self.encoder_candidates}-"
        base += "" if self.collectors is None else f"c{self.collectors}-"
        base += "" if self.observation in (None, "tree") else f"{self.observation}-"
        base += "" if self.paraphrase is None else f"para{self.paraphrase:g}-"
        updates = "default" if self.warm_start_updates is None else self.warm_start_updates
        name = f"{base}ws{updates}-{self.minutes:g}min"
        if not self.validation:
            return name
        return f"val-{name}" if self.validation_split == "validation_words" else f"val-unseen-{name}"


def run_seed(seed: int, settings: DemoSettings, root: Path) -> dict[str, Any]:
    """One demo in its own process; its summary, kept beside the others."""
    started = time.monotonic()
    done = subprocess.run(settings.argv(seed), capture_output=True, text=True, check=False)
    summary_path = Path(".distrl/demo/summary.json")
    if done.returncode != 0 or not summary_path.exists():
        raise RuntimeError(
            f"demo --seed {seed} exited with {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    summary = json.loads(summary_path.read_text())
    if summary.get("heldout_split") != settings.heldout_split:
        raise RuntimeError(
            f"demo --seed {seed} scored {summary.get('heldout_split')!r}, expected {settings.heldout_split!r}"
        )
    kept = root / f"seed{seed}"
    kept.mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(".distrl/demo/learning_curve.png"), kept / "learning_curve.png")
    summary["process_wall_s"] = round(time.monotonic() - started, 1)
    (kept / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def kept_run(path: Path, settings: DemoSettings) -> dict[str, Any] | None:
    """A seed's summary kept by an earlier run of the same settings, or None; one scored on another
    split (summaries from before `heldout_split` was recorded scored test) is refused."""
    if not path.exists():
        return None
    run = json.loads(path.read_text())
    if run.get("heldout_split", "test") != settings.heldout_split:
        raise RuntimeError(
            f"{path} scored {run.get('heldout_split', 'test')!r}, not {settings.heldout_split!r}"
        )
    return run | {"reused_from": str(path)}


def out_name(out: str | None, validation: bool, validation_split: str = "validation_words") -> str:
    """`write_result`'s name for --out: the file given (a name under bench/results, or a path), its
    dots kept; by default demo_seeds, or demo_seeds_validation (_unseen) for validation runs."""
    default = "demo_seeds_validation" + ("" if validation_split == "validation_words" else "_unseen")
    out = out or (default if validation else "demo_seeds")
    return out if out.endswith(".json") else f"{out}.json"


def separated_gain(run: dict[str, Any], target: float) -> bool:
    """Gained at least `target` and the two 95 % intervals do not overlap."""
    gain = run["heldout_success_final"] - run["heldout_success_warm_start"]
    return gain >= target and run["heldout_ci_final"][0] > run["heldout_ci_warm_start"][1]


def summarise(runs: list[dict[str, Any]], target: float) -> dict[str, Any]:
    gains = [r["heldout_success_final"] - r["heldout_success_warm_start"] for r in runs]
    return {
        "gain": t_interval(gains),
        "warm_start": t_interval([r["heldout_success_warm_start"] for r in runs]),
        "final": t_interval([r["heldout_success_final"] for r in runs]),
        "seeds_meeting_target": sum(separated_gain(r, target) for r in runs),
        "target": f"gain >= {target} with disjoint 95 % intervals",
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--minutes", type=float, default=6.0, help="the demo's RL budget")
    parser.add_argument("--target", type=float, default=0.15, help="gain a seed should reach")
    parser.add_argument(
        "--root", default=".distrl/bench/demo_seeds", help="where each seed's summary is kept"
    )
    parser.add_argument(
        "--warm-start-updates", type=int, default=None, help="the demo's SFT warm start (default: its own)"
    )
    bases = parser.add_mutually_exclusive_group()
    bases.add_argument("--base", default=None, help="the demo's --base (default: the demo's own)")
    bases.add_argument(
        "--pretrained",
        dest="base",
        action="store_const",
        const=PRETRAINED_BASE,
        help="the demo's --pretrained",
    )
    parser.add_argument(
        "--encoder-layers",
        type=int,
        default=None,
        help="the demo's --encoder-layers (with an encoder base; 0: the heads alone)",
    )
    parser.add_argument(
        "--encoder-candidates",
        choices=["pooled", "spans"],
        default=None,
        help="the demo's --encoder-candidates (with an encoder base): how it reads a candidate",
    )
    parser.add_argument(
        "--collectors", type=int, default=None, help="the demo's --collectors (default: the demo's own)"
    )
    parser.add_argument(
        "--observation",
        choices=["tree", "screen"],
        default=None,
        help="the demo's --observation: the UI tree (its default) or the screenshot read by OCR",
    )
    parser.add_argument(
        "--paraphrase",
        type=float,
        default=None,
        help="the demo's --paraphrase: the probability that a training episode's instruction is rephrased",
    )
    parser.add_argument(
        "--validation",
        action="store_true",
        help="the demo's --validation: train on fit_words, score validation_words, never load test",
    )
    parser.add_argument(
        "--validation-split",
        choices=["validation_words", "validation_unseen"],
        default="validation_words",
        help="the demo's --validation-split (with --validation): validation_unseen trains on fit_unseen",
    )
    parser.add_argument(
        "--reuse-kept",
        action="store_true",
        help="read a seed's summary kept under --root by an earlier run of the same settings instead of "
        "running it again (a bench run in parts)",
    )
    parser.add_argument(
        "--out", default=None, help="result file (default: demo_seeds, or demo_seeds_validation)"
    )
    args = parser.parse_args(argv)
    if args.validation_split != "validation_words" and not args.validation:
        parser.error("--validation-split needs --validation")
    return args


def settings_of(args: argparse.Namespace) -> DemoSettings:
    return DemoSettings(
        args.minutes,
        args.warm_start_updates,
        args.base,
        args.validation,
        args.validation_split,
        args.encoder_layers,
        args.encoder_candidates,
        args.collectors,
        args.observation,
        args.paraphrase,
    )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    settings = settings_of(args)
    before = machine()
    runs = []
    root = Path(args.root) / settings.folder()
    for seed in args.seeds:
        kept = root / f"seed{seed}" / "summary.json"
        # a part run earlier (a seed per session on 2 cores)
        run = (kept_run(kept, settings) if args.reuse_kept else None) or run_seed(seed, settings, root)
        runs.append(run)
        print(
            f"seed {seed}: {settings.heldout_split} {run['heldout_success_warm_start']:.3f} -> "
            f"{run['heldout_success_final']:.3f} (v{run['final_version']}, {run['process_wall_s'] / 60:.1f} min)",
            flush=True,
        )
    flags = " ".join(settings.flags())
    document = {
        "benchmark": "demo_seeds",
        "command": f"python -m bench.demo_seeds --seeds {' '.join(map(str, args.seeds))} --minutes {args.minutes:g}"
        + (f" {flags}" if flags else ""),
        "warm_start_updates": args.warm_start_updates,
        "base": args.base,
        "heldout_split": settings.heldout_split,
        "kept": str(root),
        "machine": before,
        "loadavg_after": machine()["loadavg_1_5_15"],
        "runs": runs,
        **summarise(runs, args.target),
    }
    path = write_result(out_name(args.out, args.validation, args.validation_split), document)
    print(
        f"gain {fmt_interval(document['gain'])}; final {fmt_interval(document['final'])} "
        f"({settings.heldout_split}); {document['seeds_meeting_target']}/{len(runs)} seeds "
        f"{document['target']}; wrote {path}"
    )


if __name__ == "__main__":
    main()
