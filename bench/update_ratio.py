"""Learner updates per minute of one base against another, measured so that a machine's drift
falls on both alike: A-RIDE updates (``Learner.update``) of the two policies on the same batches,
interleaved round by round, one torch thread.

``bench.roofline`` times each base in its own block of repeats, one after the other; two runs of it
on the same idle machine gave tiny-minilm 0.85x and 0.70x of the tiny model's updates per minute,
because what changes between blocks (the VM's CPU share, caches, frequency) lands on one base only.
Here each round times one update of every base on each of the ``--batches`` batches, in an order
that alternates between rounds, and the ratio is taken per round (CPU seconds of the candidate over
the reference's, both summed over the round's batches), so a slow round slows both. Reported: the
median and the 95 % t interval of the per-round ratios, and their inverse, updates per minute at
equal CPU; wall seconds likewise. The batches are 16 noisy-expert trajectories of General's train
tasks each, with the demo's rephrased instructions (``--paraphrase``, 0.8).

    python -m bench.update_ratio [--bases tiny tiny-minilm] [--rounds 30] [--out bench/results/update_ratio.json]
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench._common import pyplot, save_figure, write_result
from bench._stats import t_interval


def _interval(values: list[float]) -> list[float]:
    return list(t_interval(values)["ci95"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--bases", nargs=2, default=["tiny", "tiny-minilm"], metavar=("REFERENCE", "CANDIDATE")
    )
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--paraphrase", type=float, default=0.8)
    parser.add_argument("--out", default="bench/results/update_ratio.json")
    args = parser.parse_args(argv)
    if args.rounds < 3 or args.batches < 1:
        parser.error("--rounds must be >= 3 (an interval needs them) and --batches >= 1")

    import os

    import torch

    from bench.roofline import _config
    from distrl_core.learner import Learner, LearnerConfig, StepBatch
    from distrl_core.policy import Policy
    from simulators.warm_start import WarmStartConfig, collect_demonstrations

    torch.set_num_threads(1)
    demos = collect_demonstrations(WarmStartConfig(family="general", seed=0, paraphrase=args.paraphrase))
    episodes: dict[str, list] = {}
    for row in demos.rows:
        episodes.setdefault(row["episode_id"], []).append(row)
    trajectories = list(episodes.values())
    if len(trajectories) < 16 * args.batches:
        parser.error(f"the demonstrations hold {len(trajectories)} trajectories: lower --batches")
    rows = [[row for t in trajectories[16 * k : 16 * (k + 1)] for row in t] for k in range(args.batches)]
    batches = [StepBatch.from_rows(batch_rows) for batch_rows in rows]
    learners = {}
    for base in args.bases:
        torch.manual_seed(0)
        learner = Learner(Policy.create(_config(base, 0)), LearnerConfig(seed=0, critic_warmup_updates=0))
        for batch in batches:  # warm-up: optimiser state, allocator
            learner.update(batch)
        learners[base] = learner

    cpu: dict[str, list[float]] = {b: [] for b in args.bases}
    wall: dict[str, list[float]] = {b: [] for b in args.bases}
    loads = [os.getloadavg()[0]]
    for r in range(args.rounds):
        for base in args.bases if r % 2 == 0 else args.bases[::-1]:
            c, w = time.process_time(), time.perf_counter()
            for batch in batches:
                learners[base].update(batch)
            cpu[base].append(time.process_time() - c)
            wall[base].append(time.perf_counter() - w)
        loads.append(os.getloadavg()[0])
    reference, candidate = args.bases
    result: dict = {
        "benchmark": "update_ratio",
        "command": "python -m bench.update_ratio " + " ".join(argv or []),
        "bases": args.bases,
        "rounds": args.rounds,
        "batches": args.batches,
        "paraphrase": args.paraphrase,
        "steps_per_batch": [len(batch_rows) for batch_rows in rows],
        "loadavg_1min": [min(loads), max(loads)],
    }
    for name, seconds in (("cpu", cpu), ("wall", wall)):
        ratios = [c / r for c, r in zip(seconds[candidate], seconds[reference], strict=True)]
        result[name] = {
            "seconds_per_update": {b: statistics.median(v) / args.batches for b, v in seconds.items()},
            "ratio_per_round": ratios,
            "ratio_median": statistics.median(ratios),
            "ratio_mean_ci95": [statistics.mean(ratios), *_interval(ratios)],
            "updates_per_minute_vs_reference": 1 / statistics.median(ratios),
            "updates_per_minute_vs_reference_ci95": [1 / hi for hi in _interval(ratios)[::-1]],
        }
        print(
            f"{name}: {candidate} / {reference} per update {statistics.median(ratios):.3f} "
            f"[{_interval(ratios)[0]:.3f}, {_interval(ratios)[1]:.3f}] -> "
            f"{1 / statistics.median(ratios):.2f}x the updates per minute"
        )
    path = write_result(args.out, result)
    _plot(result, path.with_suffix(".png"))
    print(f"wrote {path} and its .png")
    return 0


def _plot(result: dict, path) -> None:
    """Each round's CPU ratio, its median, and the ratio at which the candidate makes 0.8x the
    reference's updates per minute."""
    plt = pyplot()
    ratios = result["cpu"]["ratio_per_round"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(range(1, len(ratios) + 1), ratios, "o", label="round")
    ax.axhline(result["cpu"]["ratio_median"], label=f"median {result['cpu']['ratio_median']:.3f}")
    ax.axhline(1 / 0.8, linestyle="--", color="grey", label="0.8x the updates per minute")
    reference, candidate = result["bases"]
    ax.set(xlabel="round", ylabel=f"CPU s, {candidate} / {reference}", title="one A-RIDE update, interleaved")
    ax.legend(fontsize=8)
    save_figure(fig, path)


if __name__ == "__main__":
    raise SystemExit(main())
