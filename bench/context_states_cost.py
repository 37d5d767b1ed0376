"""What reading MiniLM's contextual token states (base "tiny-minilm-ctx", ``policy.context_states``)
costs against "tiny-minilm": seconds of a warm-start (SFT) update on the same batch, of acting on
one step with a cold and a warm cache, and the memory the cache holds after a warm start's prompts.

The two policies train on the same batch (16 noisy-expert trajectories of General's fit_unseen
tasks, 80 % of their instructions paraphrased, as the validation pilots' warm starts), their
updates interleaved in blocks so that a shared machine's load falls on both alike. Both process CPU
seconds (what an update needs on a busy machine) and wall seconds are reported, medians over
``--updates`` updates once the cache holds the batch's segments (what the learner pays from then
on), and the first update with every cache empty (the trunk's pass over each distinct segment).
Acting: per step, cold (the context cache and the prompt cache emptied) and warm (the same step
again), in wall milliseconds. The cache's size: its bytes, and the process's resident memory
before and after every prompt of the warm start's demonstrations was read. One torch thread.

    python -m bench.context_states_cost [--updates 30] [--out bench/results/context_states_cost.json]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench._common import one_thread_cost_document, write_result

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

BASES = ("tiny-minilm", "tiny-minilm-ctx")
BLOCK = 5  # updates of one policy before the other's turn


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(process CPU seconds, wall seconds) of one call."""
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - cpu, time.perf_counter() - wall


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def _cold(policy: Any) -> None:
    from distrl_core.policy.context_states import context_cache

    context_cache().clear()
    policy._encode.cache_clear()  # the policy's prompt cache


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--updates", type=int, default=30, help="timed updates per base (default: %(default)s)"
    )
    parser.add_argument("--out", default="bench/results/context_states_cost.json")
    args = parser.parse_args(argv)

    import torch
    from transformers.utils import logging as hf_logging

    from distrl_core.policy import Policy
    from distrl_core.policy.config import policy_config_for
    from distrl_core.policy.context_states import context_cache
    from distrl_core.policy.types import StepInput
    from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
    from simulators.simdroid.tasks import load_tasks
    from simulators.warm_start import (
        WarmStartConfig,
        _sft_backward,
        collect_demonstrations,
        warm_start_optimizer,
    )

    hf_logging.disable_progress_bar()
    torch.set_num_threads(1)
    warm = WarmStartConfig(family="general", split="fit_unseen", seed=0, paraphrase=0.8)
    demos = collect_demonstrations(warm)
    episodes: dict[str, list] = {}
    for row in demos.rows:
        episodes.setdefault(row["episode_id"], []).append(row)
    rows = [row for trajectory in list(episodes.values())[:16] for row in trajectory]
    env = SimDroidEnv(SimDroidEnvConfig(screenshots=False, ui_xml=False))
    observations = [env.reset(task, seed=0) for task in load_tasks("general", "fit_unseen")[:160:10]]

    steppers: dict[str, Callable[[], None]] = {}
    results: dict[str, dict[str, Any]] = {}
    for base in BASES:
        torch.manual_seed(0)
        policy = Policy.create(policy_config_for(base, 0, "fit_unseen", device="cpu"))
        optimizer = warm_start_optimizer(policy, warm)

        def step(policy: Any = policy, optimizer: Any = optimizer) -> None:
            optimizer.zero_grad(set_to_none=True)
            with policy.with_word_dropout(warm.entity_dropout, warm.word_dropout, warm.phrasing_dropout):
                _sft_backward(policy.train(), rows)
            optimizer.step()

        _cold(policy)
        first = _timed(step)
        step()  # the optimiser's state, warm
        cold_act, warm_act = [], []
        for observation in observations:
            act = functools.partial(policy.act, [observation], greedy=True)
            _cold(policy)
            cold_act.append(_timed(act)[1])
            warm_act.append(_timed(act)[1])
        steppers[base] = step
        results[base] = {
            "first_update_cold_cpu_s": first[0],
            "first_update_cold_wall_s": first[1],
            "act_step_cold_wall_ms": 1000 * statistics.median(cold_act),
            "act_step_warm_wall_ms": 1000 * statistics.median(warm_act),
            "update_cpu_s": [],
            "update_wall_s": [],
        }
    for _ in range(0, args.updates, BLOCK):
        for base in BASES:
            for _ in range(BLOCK):
                cpu, wall = _timed(steppers[base])
                results[base]["update_cpu_s"].append(cpu)
                results[base]["update_wall_s"].append(wall)
    for base in BASES:
        cpu, wall = results[base].pop("update_cpu_s"), results[base].pop("update_wall_s")
        results[base] |= {
            "updates": len(cpu),
            "update_cpu_s_median": statistics.median(cpu),
            "update_wall_s_median": statistics.median(wall),
        }
        print(base, json.dumps(results[base]), flush=True)
    plain, context = (results[b] for b in BASES)
    ratios = {
        key: context[key] / plain[key]
        for key in ("update_cpu_s_median", "update_wall_s_median", "first_update_cold_cpu_s")
    }
    print("ratios (tiny-minilm-ctx / tiny-minilm):", json.dumps(ratios), flush=True)

    # The cache after a warm start: every prompt of its demonstrations read once (what its 300
    # updates of 16 trajectories sample, all but certainly every episode), from an empty cache.
    policy = Policy.create(policy_config_for("tiny-minilm-ctx", 0, "fit_unseen", device="cpu"))
    assert policy.config.subwords is not None
    _cold(policy)
    context_cache().states(policy.config.subwords.source, ["warm"])  # the trunk loaded before measuring
    before = _rss_mb()
    with torch.no_grad():
        for start in range(0, len(demos.rows), 64):
            chunk = demos.rows[start : start + 64]
            policy.eval().evaluate_steps(
                [StepInput(r["instruction"], r["observation_text"], r["action"]) for r in chunk]
            )
    cache = context_cache()
    memory = {
        "demonstration_steps": len(demos.rows),
        "distinct_segments": len(cache),
        "cache_mb": cache.bytes / 2**20,
        "rss_before_mb": before,
        "rss_after_mb": _rss_mb(),
        "rss_growth_mb": _rss_mb() - before,
        "unaligned_tokens": cache.unaligned,
    }
    print("cache after the warm start's prompts:", json.dumps(memory), flush=True)
    payload = one_thread_cost_document(
        "context_states_cost", len(rows), results=results, ratios=ratios, cache_after_warm_start=memory
    )
    print(f"wrote {write_result(args.out, payload)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
