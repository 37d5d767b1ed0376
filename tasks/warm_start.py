"""The warm start: supervised fine-tuning on noisy scripted-expert demonstrations, published as a version.

DistRL and DigiRL start RL from AutoUI, a supervised checkpoint; on SimDroid the equivalent is SFT
on the noisy expert's demonstrations of the train split, which gives a modest held-out success.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import MissingContextError

from distrl_core.policy import save_policy
from distrl_core.policy.config import CandidateReading, PolicyConfig, TinyModelConfig, Vocabulary
from distrl_core.policy.defaults import describe_defaults
from distrl_core.policy.model import Policy
from simulators.warm_start import WarmStartConfig, collect_demonstrations, supervised_warm_start
from storage.registry import PolicyRegistry
from tasks.mlflow_metrics import start_tracked_run


def policy_config_for(
    base: str | None,
    seed: int = 0,
    vocabulary: Vocabulary = "train",
    encoder_layers: int | None = None,
    encoder_candidates: CandidateReading | None = None,
) -> PolicyConfig:
    """The policy of a warm start: the tiny default (initial weights from ``seed``, its word
    vocabulary from the ``vocabulary`` tasks: "train", or "fit_words" when choices are made on
    a validation selection's fit tasks), an encoder base (its top layer and the heads trained; "minilm" names the
    packaged all-MiniLM-L6-v2), or a causal LM adapted with LoRA ("smollm2" names the packaged
    SmolLM2); ``seed`` also seeds the sampler. A pretrained base brings its own tokenizer.
    ``encoder_layers``: an encoder base's top layers trained (None: EncoderSettings' default);
    ``encoder_candidates``: how it reads a candidate, "pooled" or "spans" (None: its default)."""
    if base is None:
        if encoder_layers is not None or encoder_candidates is not None:
            raise ValueError(
                "encoder_layers and encoder_candidates apply to an encoder base (e.g. base='minilm'), not "
                "the tiny model"
            )
        return PolicyConfig(seed=seed, tiny=TinyModelConfig(seed=seed), vocabulary=vocabulary)
    from distrl_core.policy.config import EncoderSettings, LoraSettings
    from distrl_core.policy.pretrained import is_encoder_folder, resolve_base

    base = resolve_base(base)
    if is_encoder_folder(base):
        chosen: dict[str, Any] = {} if encoder_layers is None else {"trainable_layers": encoder_layers}
        chosen |= {} if encoder_candidates is None else {"candidates": encoder_candidates}
        return PolicyConfig(base=base, encoder=EncoderSettings(**chosen), seed=seed)
    if encoder_layers is not None or encoder_candidates is not None:
        raise ValueError(
            f"encoder_layers and encoder_candidates apply to an encoder base; {base} is a causal LM "
            "adapted with LoRA: leave them out"
        )
    return PolicyConfig(base=base, lora=LoraSettings(), seed=seed)


def _logger() -> logging.Logger | logging.LoggerAdapter:
    """The run's logger inside a flow or task run; the module's when called directly (`.fn`)."""
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger(__name__)


@task(cache_policy=NO_CACHE)
def warm_start_policy(
    config: WarmStartConfig | None = None, policy_config: PolicyConfig | None = None
) -> int:
    """Train a policy on demonstrations and publish it; returns its registry version."""
    config = config or WarmStartConfig()
    demos = collect_demonstrations(config)
    policy = Policy.create(policy_config or PolicyConfig())
    _logger().info("warm start settings: %s", describe_defaults(policy.config))
    history = supervised_warm_start(policy, demos.rows, config)
    registry = PolicyRegistry()
    run_id = start_tracked_run(
        registry,
        "warm-start",
        tags={"role": "warm_start"},
        params={f"warm_start.{k}": v for k, v in asdict(config).items()},
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = save_policy(policy, Path(tmp) / "policy")
        version = registry.publish(
            path,
            run_id=run_id,
            tags={
                "warm_start": 1,
                "learner_step": 0,
                "demo_episodes": len(demos.episodes),
                "demo_success": f"{demos.success_rate:.3f}",
            },
        )
    if history:
        registry.client.log_metric(run_id, "sft_final_loss", float(history[-1].get("loss", float("nan"))))
    registry.client.set_terminated(run_id)
    return version
