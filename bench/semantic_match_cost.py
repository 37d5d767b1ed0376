"""What the semantic match feature (base "tiny-minilm-sem", or ``--candidate`` another base that reads
it) costs against "tiny-minilm": process CPU seconds of a learner update on the same batch, and of acting on one step.

The two learners update on the same batch (16 noisy-expert trajectories of General's train split,
as ``bench.roofline``), their updates interleaved in blocks so that a shared machine's load falls on
both alike; CPU seconds of the process (not wall-clock) are what an update needs on a busy machine.
Reported per base: the median and mean over ``--updates`` updates with the features cached (what
the learner pays once a step has been encoded), and the first update with every cache empty (the
encoder's pass over each distinct instruction and label once, then cached per process); per acting
step, cold (every cache emptied: the instruction and each label of the screen encoded), warm (the
same step again), and a seen screen under a new instruction (one encoder pass). One torch thread.

    python -m bench.semantic_match_cost [--updates 30] [--candidate tiny-minilm-apps]
        [--out bench/results/semantic_match_cost.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import replace
from typing import Any

from bench._common import one_thread_cost_document, write_result
from distrl_core.policy.config import SEMANTIC_MATCH_BASES

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REFERENCE = "tiny-minilm"
CANDIDATES = sorted(SEMANTIC_MATCH_BASES)  # every base that reads the feature
BLOCK = 5  # updates of one learner before the other's turn


def _cpu(fn) -> float:
    started = time.process_time()
    fn()
    return time.process_time() - started


def _cold(policy) -> None:
    from distrl_core.policy.semantic_match import embedding_cache

    embedding_cache().clear()
    policy._encode.cache_clear()  # the policy's prompt cache (the feature is computed on its misses)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--updates", type=int, default=30, help="timed updates per base (default: %(default)s)"
    )
    parser.add_argument(
        "--candidate",
        choices=CANDIDATES,
        default="tiny-minilm-sem",
        help="the base costed against tiny-minilm",
    )
    parser.add_argument("--out", default="bench/results/semantic_match_cost.json")
    args = parser.parse_args(argv)
    bases = (REFERENCE, args.candidate)

    import torch
    from transformers.utils import logging as hf_logging

    from distrl_core.learner import Learner, LearnerConfig, StepBatch
    from distrl_core.policy import Policy
    from distrl_core.policy.config import policy_config_for
    from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
    from simulators.simdroid.tasks import load_tasks
    from simulators.warm_start import WarmStartConfig, collect_demonstrations

    hf_logging.disable_progress_bar()
    torch.set_num_threads(1)
    demos = collect_demonstrations(WarmStartConfig(family="general", seed=0))
    episodes: dict[str, list] = {}
    for row in demos.rows:
        episodes.setdefault(row["episode_id"], []).append(row)
    rows = [row for trajectory in list(episodes.values())[:16] for row in trajectory]
    batch = StepBatch.from_rows(rows)
    env = SimDroidEnv(SimDroidEnvConfig(screenshots=False, ui_xml=False))
    observations = [env.reset(task, seed=0) for task in load_tasks("general", "train")[:160:10]]

    learners: dict[str, Any] = {}
    results: dict[str, dict[str, Any]] = {}
    for base in bases:
        torch.manual_seed(0)
        policy = Policy.create(policy_config_for(base, 0, device="cpu"))
        learner = Learner(policy, LearnerConfig(seed=0, critic_warmup_updates=0))
        _cold(policy)
        first = _cpu(lambda learner=learner: learner.update(batch))
        learner.update(batch)  # the optimiser's state, warm
        cold_act, warm_act, new_instruction = [], [], []
        for observation in observations:
            _cold(policy)
            cold_act.append(_cpu(lambda p=policy, o=observation: p.act([o], greedy=True)))
            warm_act.append(_cpu(lambda p=policy, o=observation: p.act([o], greedy=True)))
            # a screen seen before under an instruction never seen: one encoder pass (the instruction)
            reworded = replace(observation, instruction=observation.instruction + " now")
            new_instruction.append(_cpu(lambda p=policy, o=reworded: p.act([o], greedy=True)))
        learners[base] = learner
        results[base] = {
            "first_update_cold_cpu_s": first,
            "act_step_cold_cpu_s": statistics.median(cold_act),
            "act_step_warm_cpu_s": statistics.median(warm_act),
            "act_step_new_instruction_cpu_s": statistics.median(new_instruction),
            "update_cpu_s": [],
        }
    for _ in range(0, args.updates, BLOCK):
        for base in bases:
            learner = learners[base]
            results[base]["update_cpu_s"] += [_cpu(lambda lr=learner: lr.update(batch)) for _ in range(BLOCK)]
    for base in bases:
        times = results[base].pop("update_cpu_s")
        results[base] |= {
            "updates": len(times),
            "update_cpu_s_median": statistics.median(times),
            "update_cpu_s_mean": statistics.fmean(times),
        }
        print(base, json.dumps(results[base]), flush=True)
    plain, semantic = (results[b] for b in bases)
    ratios = {
        "update_median": semantic["update_cpu_s_median"] / plain["update_cpu_s_median"],
        "update_mean": semantic["update_cpu_s_mean"] / plain["update_cpu_s_mean"],
        "first_update_cold": semantic["first_update_cold_cpu_s"] / plain["first_update_cold_cpu_s"],
        "act_step_cold": semantic["act_step_cold_cpu_s"] / plain["act_step_cold_cpu_s"],
        "act_step_warm": semantic["act_step_warm_cpu_s"] / plain["act_step_warm_cpu_s"],
        "act_step_new_instruction": semantic["act_step_new_instruction_cpu_s"]
        / plain["act_step_new_instruction_cpu_s"],
    }
    print(f"ratios ({args.candidate} / {REFERENCE}):", json.dumps(ratios), flush=True)
    payload = one_thread_cost_document("semantic_match_cost", len(rows), results=results, ratios=ratios)
    print(f"wrote {write_result(args.out, payload)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
