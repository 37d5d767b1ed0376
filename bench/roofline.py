"""What the machine can do and what the policies' updates get of it: a small roofline.

1. fp32 matmul peak: GFLOP/s of ``torch.mm`` on square matrices (512, 1024, 2048) at 1 and 2 torch
   threads, the best of ``--repeats`` (the machine is shared: the load average is recorded).
2. per base: the acting step (one observation, candidates scored; with the encoder's frozen-state
   cache cold and warm), and one learner update (``Learner.update``, A-RIDE) on 16 trajectories of
   the noisy expert's demonstrations: seconds (median of ``--repeats``; ``update_cpu_s``: the
   process's CPU seconds, what the update needs on a shared machine), updates per minute, the
   FLOPs of the update (``torch.utils.flop_counter.FlopCounterMode``, forward and backward; it counts
   matmuls and attention, which dominate), and the achieved GFLOP/s as a share of the peak; for an
   encoder base also the update with its frozen-state cache emptied first (``update_cold_*``).

Bases: ``tiny`` (the default), ``tiny-minilm`` (the tiny model on MiniLM's WordPiece sub-words and
projected word-piece embeddings, the table frozen: PolicyConfig.subwords; ``-trained``: the table
trained too), ``minilm-L<k>`` (all-MiniLM-L6-v2 with its top k layers trained; the
folder from ``distrl pretrained``; ``-spans``: candidates read in place, EncoderSettings.candidates), and ``smollm2`` (acting only: one of its updates takes minutes on
this CPU, see docs/performance.md "Pretrained backbone").

With ``--paraphrase 0 0.8`` each base is measured on demonstrations whose instructions keep the
templates and on ones rephrased with that probability (the demo's rephrased training): longer,
more varied instructions cost an update more tokens and its caches more misses.

    python -m bench.roofline [--threads 1 2] [--bases tiny minilm-L1 ...] [--paraphrase 0 ...] [--out bench/results/roofline.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

BASES = (
    "tiny",
    "tiny-minilm",
    "tiny-minilm-trained",
    "minilm-L0",
    "minilm-L1",
    "minilm-L2",
    "minilm-L0-spans",
    "minilm-L1-spans",
    "smollm2",
)


def matmul_peak(threads: int, repeats: int) -> dict[str, float]:
    import torch

    torch.set_num_threads(threads)
    out = {}
    for n in (512, 1024, 2048):
        a, b = torch.randn(n, n), torch.randn(n, n)
        torch.mm(a, b)  # warm-up
        best = float("inf")
        for _ in range(repeats):
            started = time.perf_counter()
            torch.mm(a, b)
            best = min(best, time.perf_counter() - started)
        out[f"gflops_{n}"] = 2 * n**3 / best / 1e9
    out["gflops_peak"] = max(out.values())
    return out


def _config(base: str, seed: int):
    from distrl_core.policy import LoraSettings, PolicyConfig
    from distrl_core.policy.config import EncoderSettings
    from distrl_core.policy.pretrained import resolve_base

    if base == "tiny":
        return PolicyConfig(seed=seed, device="cpu")
    if base.startswith("tiny-minilm"):
        from distrl_core.policy.config import policy_config_for

        # any sub-word base by its own name; "-trained" (a bench variant) trains the table too
        config = policy_config_for(base.removesuffix("-trained"), seed, device="cpu")
        assert config.subwords is not None
        config.subwords.train_embeddings = base.endswith("-trained")
        return config
    if base.startswith("minilm-L"):
        layers, _, reading = base.removeprefix("minilm-L").partition("-")
        encoder = EncoderSettings(trainable_layers=int(layers), candidates=reading or "pooled")  # type: ignore[arg-type]
        return PolicyConfig(base=resolve_base("minilm"), encoder=encoder, seed=seed, device="cpu")
    return PolicyConfig(base=resolve_base("smollm2"), lora=LoraSettings(), seed=seed, device="cpu")


def _median_cpu_time(fn, repeats: int) -> float:
    """Median CPU seconds of the process per call: on a machine shared with other work, what a call
    itself needs, where wall-clock seconds also count the time other processes held the cores."""
    times = []
    for _ in range(repeats):
        started = time.process_time()
        fn()
        times.append(time.process_time() - started)
    return statistics.median(times)


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure_base(
    base: str, threads: int, repeats: int, peak: float, seed: int = 0, paraphrase: float = 0.0
) -> dict:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from distrl_core.learner import Learner, LearnerConfig, StepBatch
    from distrl_core.policy import Policy
    from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
    from simulators.warm_start import WarmStartConfig, collect_demonstrations

    torch.manual_seed(seed)
    policy = Policy.create(_config(base, seed))
    env = SimDroidEnv(SimDroidEnvConfig(screenshots=False, ui_xml=False))
    observations = [env.reset(f"general-test-{i:04d}", seed=i) for i in range(8)]
    result: dict = {"base": base, "threads": threads, "paraphrase": paraphrase}
    torch.set_num_threads(threads)
    cache = getattr(policy.model, "cache", None)
    if cache is not None:
        cache.clear()
        started = time.perf_counter()
        policy.act(observations[:1], greedy=True)
        result["act_step_cold_s"] = time.perf_counter() - started
    else:
        policy.act(observations[:1], greedy=True)  # warm-up
    result["act_step_s"] = _median_time(lambda: policy.act(observations[:1], greedy=True), repeats)
    if base == "smollm2":
        return result

    demos = collect_demonstrations(WarmStartConfig(family="general", seed=seed, paraphrase=paraphrase))
    episodes: dict[str, list] = {}
    for row in demos.rows:
        episodes.setdefault(row["episode_id"], []).append(row)
    rows = [row for trajectory in list(episodes.values())[:16] for row in trajectory]
    # No critic-only warm-up: an update that trains the actor (the warm-up's skip its backward).
    learner = Learner(policy, LearnerConfig(seed=seed, critic_warmup_updates=0))
    batch = StepBatch.from_rows(rows)
    learner.update(batch)  # warm-up: optimiser state, and the frozen-state cache fills
    with FlopCounterMode(display=False) as counter:
        learner.update(batch)
    flops = counter.get_total_flops()
    seconds = _median_time(lambda: learner.update(batch), repeats)
    instructions = [str(row["instruction"]) for row in rows]
    result |= {
        "update_steps": len(rows),
        "instruction_chars_mean": statistics.mean(map(len, instructions)),
        "update_s": seconds,
        "update_cpu_s": _median_cpu_time(lambda: learner.update(batch), repeats),
        "updates_per_min": 60 / seconds,
        "update_gflop": flops / 1e9,
        "achieved_gflops": flops / seconds / 1e9,
        "share_of_peak": flops / seconds / 1e9 / peak,
        "trainable_parameters": sum(
            p.numel() for p in policy.actor_parameters() + policy.critic_parameters()
        ),
    }
    if cache is not None:
        result["cache_mb"] = cache.bytes / 2**20
        result |= _cold_update(learner, batch, cache, repeats)
    return result


def _cold_update(learner, batch, cache, repeats: int) -> dict:
    """The same update with the frozen-state cache emptied first: what the learner pays for steps
    whose texts were evicted (a replay larger than the cache, sampled by priority)."""
    from torch.utils.flop_counter import FlopCounterMode

    cache.clear()
    with FlopCounterMode(display=False) as counter:
        learner.update(batch)
    times = []
    for _ in range(repeats):
        cache.clear()
        started = time.perf_counter()
        learner.update(batch)
        times.append(time.perf_counter() - started)
    return {"update_cold_s": statistics.median(times), "update_cold_gflop": counter.get_total_flops() / 1e9}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--bases", nargs="+", choices=BASES, default=["tiny", "minilm-L0", "minilm-L1", "minilm-L2"]
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--paraphrase", type=float, nargs="+", default=[0.0],
        help="rephrase the demonstrations' instructions with these probabilities (one measurement each)",
    )  # fmt: skip
    parser.add_argument("--out", default="bench/results/roofline.json")
    args = parser.parse_args()
    load_before = os.getloadavg()
    # The machine is shared: the peak is measured again around every base and the best kept, so
    # a share of peak is against what this machine gave at its least loaded moment of the run.
    peaks = {threads: matmul_peak(threads, max(args.repeats, 5)) for threads in args.threads}
    results = []
    for base, paraphrase in ((b, p) for b in args.bases for p in args.paraphrase):
        for threads in args.threads:
            r = measure_base(
                base, threads, args.repeats, peaks[threads]["gflops_peak"], paraphrase=paraphrase
            )
            again = matmul_peak(threads, max(args.repeats, 5))
            if again["gflops_peak"] > peaks[threads]["gflops_peak"]:
                peaks[threads] = again
            r["loadavg_1min"] = round(os.getloadavg()[0], 2)
            results.append(r)
            print(json.dumps(r), flush=True)
    for r in results:  # shares against the best peak seen at that thread count
        if "achieved_gflops" in r:
            r["share_of_peak"] = r["achieved_gflops"] / peaks[r["threads"]]["gflops_peak"]
    for threads, peak in peaks.items():
        print(f"matmul fp32, {threads} thread(s): {peak['gflops_peak']:.1f} GFLOP/s (best seen)", flush=True)
    payload = {
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
        "matmul_peak": {str(k): v for k, v in peaks.items()},
        "results": results,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
