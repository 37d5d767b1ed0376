"""The tiny default policy vs a pretrained base, side by side: SmolLM2-135M-Instruct with LoRA, an
encoder (all-MiniLM-L6-v2, its top layer trained), or a vision-language model (a folder whose config
has a ``vision_config``, e.g. SmolVLM or Gemma 3: it reads each step's screenshot and writes the
action, LoRA on its text decoder; the environment renders screenshots for it). ``--base`` names the
folder; ``python -m bench.tiny_vlm`` writes a tiny random one for a smoke check on CPU.

For each model, in its own process (so that peak memory is its own): acting latency per step
(one observation, and a batch of 16), the time of one learner update on 16 trajectories, peak
memory (RSS on CPU, allocated GPU memory on CUDA), and held-out General success after the same
wall-clock budget of warm start (SFT on the noisy expert, ``--warm-start-share`` of the budget)
then A-RIDE rounds (simulators.local_loop.train_rounds) until the budget is spent. The
budget counts everything in the loop: collection, updates and the small per-round evaluation on
``--eval-tasks`` held-out tasks; the final held-out number is on ``--final-eval-tasks`` tasks.

Base-dependent settings (learning rates, micro-batches) come from policy.defaults and are written
into the result. Imports only torch, transformers, peft, numpy, pyarrow and matplotlib (no DuckDB,
Prefect, MLflow or gguf): it runs on a bare GPU machine given the converted folder.

    python -m bench.pretrained --base .distrl/models/smollm2-135m-instruct [--device cpu|cuda]
        [--budget-seconds 300] [--bf16] [--out bench/results/pretrained.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

MODELS = ("tiny", "pretrained")


class _BudgetSpent(Exception):
    pass


def _memory(device: str) -> dict[str, float]:
    import torch

    out = {"peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9}
    if device == "cuda":
        out["peak_gpu_allocated_gb"] = torch.cuda.max_memory_allocated() / 1e9
    return out


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def _acting_latency(policy, observations, device: str, repeats: int) -> dict[str, float]:
    def timed(batch) -> float:
        policy.act(batch, greedy=True)  # warm-up (caches, kernels)
        _sync(device)
        started = time.perf_counter()
        for _ in range(repeats):
            policy.act(batch, greedy=True)
        _sync(device)
        return (time.perf_counter() - started) / repeats

    single = timed(observations[:1])
    batched = timed(observations[:16])
    return {
        "act_single_s": single,
        "act_batch16_s": batched,
        "act_batch16_per_step_s": batched / len(observations[:16]),
    }


def run_one(model: str, args: argparse.Namespace) -> dict:
    import torch

    from distrl_core.learner import Learner, LearnerConfig, StepBatch
    from distrl_core.policy import LoraSettings, Policy, PolicyConfig
    from distrl_core.policy.config import EncoderSettings
    from distrl_core.policy.defaults import describe_defaults, training_defaults
    from distrl_core.policy.pretrained import is_encoder_folder, is_vision_folder
    from simulators.local_loop import LoopConfig, evaluate_success, train_rounds
    from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
    from simulators.simdroid.device import SimDroidConfig
    from simulators.simdroid.tasks import load_tasks
    from simulators.warm_start import WarmStartConfig, collect_demonstrations, supervised_warm_start

    torch.manual_seed(args.seed)
    device = args.device
    if model == "tiny":
        config = PolicyConfig(device=device, seed=args.seed)
    elif is_encoder_folder(args.base):  # all-MiniLM-L6-v2: top layer trained, lower layers frozen and cached
        config = PolicyConfig(base=args.base, encoder=EncoderSettings(), device=device, seed=args.seed)
    elif is_vision_folder(args.base):  # writes the action from the screenshot and the instruction
        config = PolicyConfig(
            base=args.base, mode="generative", vision=True, lora=LoraSettings(), device=device, seed=args.seed
        )
    else:
        config = PolicyConfig(base=args.base, lora=LoraSettings(), device=device, seed=args.seed)
    # Rendering a PNG per step is the slowest part of a SimDroid step: only a vision policy pays it.
    screen = SimDroidEnvConfig(
        device=SimDroidConfig(distractor_prob=0.1), screenshots=config.vision, ui_xml=False
    )
    # Acting latency only: the weights do not change inside it (see the learning run below).
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device == "cuda" and args.bf16)
    learner_threads = args.threads or torch.get_num_threads()
    result: dict = {"model": model, "base": config.base, "settings": describe_defaults(config)}
    result["training_defaults"] = training_defaults(config).__dict__
    print(f"[{model}] {result['settings']}", flush=True)
    started = time.perf_counter()
    policy = Policy.create(config)
    result["load_s"] = time.perf_counter() - started
    result["trainable_parameters"] = sum(
        p.numel() for p in policy.actor_parameters() + policy.critic_parameters()
    )

    env = SimDroidEnv(screen)
    observations = [env.reset(f"general-test-{i:04d}", seed=i) for i in range(16)]
    torch.set_num_threads(1)  # acting role: one thread (policy.defaults)
    with autocast:
        result.update(_acting_latency(policy, observations, device, args.act_repeats))
    torch.set_num_threads(learner_threads)

    warm = WarmStartConfig(family="general", batch_size=args.batch_size, seed=args.seed)
    demos = collect_demonstrations(warm, env=screen)
    by_episode: dict[str, list] = {}
    for row in demos.rows:
        by_episode.setdefault(row["episode_id"], []).append(row)
    sixteen = [row for rows in list(by_episode.values())[:16] for row in rows]
    # Timed on the policy itself (a second copy would double the peak memory), then restored.
    trained = [p for p in policy.actor_parameters() + policy.critic_parameters()]
    snapshot = [p.detach().clone() for p in trained]
    # No critic-only warm-up: the timed updates train the actor (the warm-up's skip its backward).
    timing_learner = Learner(policy, LearnerConfig(mixed_precision=args.bf16, critic_warmup_updates=0))
    if device == "cuda":
        timing_learner.update(StepBatch.from_rows(sixteen))  # warm-up (kernel selection, allocator)
    _sync(device)
    started = time.perf_counter()
    for _ in range(args.update_repeats):
        timing_learner.update(StepBatch.from_rows(sixteen))
    _sync(device)
    update_s = (time.perf_counter() - started) / args.update_repeats
    result |= {
        "update16_s": update_s,
        "update16_steps": len(sixteen),
        "learner_trajectories_per_s": 16 / update_s,
    }
    del timing_learner
    with torch.no_grad():
        for parameter, saved in zip(trained, snapshot, strict=True):
            parameter.copy_(saved)

    # The learning run: warm start for a share of the budget, then A-RIDE rounds until it is spent.
    # The first update pays for kernel compilation and allocator warm-up (seconds on a GPU, where a
    # tiny update then takes milliseconds): the share is sized from the second one.
    budget_started = time.perf_counter()
    # Training is never wrapped in autocast (distrl_core.learner.precision): the SFT runs in float32
    # and the learner autocasts each forward pass itself when --bf16 is set.
    first = supervised_warm_start(policy, demos.rows, WarmStartConfig(**{**warm.__dict__, "updates": 1}))
    second_started = time.perf_counter()
    first += supervised_warm_start(policy, demos.rows, WarmStartConfig(**{**warm.__dict__, "updates": 1}))
    per_update = time.perf_counter() - second_started
    spent = time.perf_counter() - budget_started
    sft_updates = max(0, int((args.budget_seconds * args.warm_start_share - spent) / per_update))
    history = first + supervised_warm_start(
        policy, demos.rows, WarmStartConfig(**{**warm.__dict__, "updates": sft_updates})
    )
    result["warm_start"] = {
        "updates": len(history),
        "seconds": time.perf_counter() - budget_started,
        "nll_first": history[0]["nll"],
        "nll_last": history[-1]["nll"],
    }
    learner = Learner(policy, LearnerConfig(mixed_precision=args.bf16, seed=args.seed))
    loop = LoopConfig(
        family="general",
        eval_tasks=args.eval_tasks,
        rounds=10**6,
        episodes_per_round=args.episodes_per_round,
        updates_per_round=args.updates_per_round,
        batch_size=args.batch_size,
        seed=args.seed,
        env=screen,
    )
    rounds: list[dict] = []

    def on_round(r) -> None:
        elapsed = time.perf_counter() - budget_started
        rounds.append(
            {"round": r.round, "elapsed_s": elapsed, "updates": r.updates, "env_steps": r.env_steps}
            | {"heldout_success": r.heldout_success, "train_success": r.train_success}
            | {k: r.metrics[k] for k in ("actor_loss", "critic_loss", "update_s") if k in r.metrics}
        )
        print(f"[{model}] {rounds[-1]}", flush=True)
        if elapsed >= args.budget_seconds:
            raise _BudgetSpent

    with contextlib.suppress(_BudgetSpent):
        train_rounds(learner, loop, on_round)
    result["rounds"] = rounds
    result["budget_used_s"] = time.perf_counter() - budget_started
    result["rl_updates"] = learner.updates
    test_tasks = load_tasks("general", "test")[: args.final_eval_tasks]
    result["final_heldout_success"] = evaluate_success(policy, test_tasks, loop.env, parallel=16)
    result["final_eval_tasks"] = len(test_tasks)
    result |= _memory(device)
    return result


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (curve, bars) = plt.subplots(1, 2, figsize=(12, 4.5))
    for result in results:
        rounds = result["rounds"]
        curve.plot(
            [r["elapsed_s"] for r in rounds],
            [r["heldout_success"] for r in rounds],
            marker="o",
            label=f"{result['model']} ({result['rl_updates']} RL updates)",
        )
    curve.set_xlabel("wall-clock since the warm start began (s)")
    curve.set_ylabel("held-out General success (greedy)")
    curve.set_ylim(-0.02, 1.02)
    curve.legend()
    names = [r["model"] for r in results]
    metrics = ("act_single_s", "act_batch16_per_step_s", "update16_s")
    width = 0.25
    for i, metric in enumerate(metrics):
        bars.bar(
            [x + i * width for x in range(len(names))], [r[metric] for r in results], width, label=metric
        )
    bars.set_xticks([x + width for x in range(len(names))], names)
    bars.set_yscale("log")
    bars.set_ylabel("seconds")
    bars.legend()
    fig.suptitle(
        f"tiny default vs pretrained {Path(results[-1].get('base') or '').name} on {results[0]['device']}"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", help="converted Hugging Face folder (`distrl pretrained`)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--budget-seconds", type=float, default=300.0, help="warm start + A-RIDE, per model")
    parser.add_argument("--warm-start-share", type=float, default=0.3)
    parser.add_argument(
        "--bf16",
        action="store_true",
        help="bfloat16: acting latency and the learner's forward passes (CUDA only)",
    )
    parser.add_argument("--out", default="bench/results/pretrained.json")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--batch-size", type=int, default=16, help="trajectories per SFT / RL update")
    parser.add_argument("--episodes-per-round", type=int, default=32)
    parser.add_argument("--updates-per-round", type=int, default=8)
    parser.add_argument("--eval-tasks", type=int, default=16, help="held-out tasks per round's evaluation")
    parser.add_argument("--final-eval-tasks", type=int, default=64)
    parser.add_argument("--act-repeats", type=int, default=5)
    parser.add_argument("--update-repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0, help="learner torch threads (0: torch's default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=MODELS, help=argparse.SUPPRESS)  # internal: one model, JSON out
    args = parser.parse_args()
    if "pretrained" in args.models and not (args.base and Path(args.base, "config.json").is_file()):
        parser.error(
            f"--base must name a converted model folder (run `distrl pretrained`), got {args.base!r}"
        )
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            parser.error("--device cuda: no CUDA device is visible")
    if args.only:
        print("RESULT " + json.dumps(run_one(args.only, args) | {"device": args.device}), flush=True)
        return 0
    results = []
    for model in args.models:  # one process per model: its peak memory is its own
        argv = [a for a in sys.argv[1:] if a != "--only"]
        done = subprocess.run(
            [sys.executable, "-m", "bench.pretrained", *argv, "--only", model],
            stdout=subprocess.PIPE,
            text=True,
            check=False,
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if done.returncode or not lines:
            print(done.stdout[-4000:])
            raise SystemExit(f"bench for {model} failed (exit {done.returncode})")
        print("\n".join(line for line in done.stdout.splitlines() if not line.startswith("RESULT ")))
        results.append(json.loads(lines[-1][len("RESULT ") :]))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "args": {k: v for k, v in vars(args).items() if k != "only"},
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_1_5_15": [round(x, 2) for x in os.getloadavg()],
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
        "results": results,
    }
    out.write_text(json.dumps(payload, indent=2))
    plot(results, out.with_suffix(".png"))
    for r in results:
        print(
            f"{r['model']:>10}: act 1 {r['act_single_s'] * 1e3:.0f} ms, act 16 {r['act_batch16_s'] * 1e3:.0f} ms, "
            f"update(16) {r['update16_s']:.2f} s, peak RSS {r['peak_rss_gb']:.2f} GB, "
            f"SFT {r['warm_start']['updates']} + RL {r['rl_updates']} updates, "
            f"held-out {r['final_heldout_success']:.2f}"
        )
    print(f"wrote {out} and {out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
