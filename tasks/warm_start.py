"""The warm start: supervised fine-tuning on noisy scripted-expert demonstrations, published as a version.

DistRL and DigiRL start RL from AutoUI, a supervised checkpoint; on SimDroid the equivalent is SFT
on the noisy expert's demonstrations of the train split, which gives a modest held-out success.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import asdict
from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import MissingContextError

from distrl_core.policy import save_policy
from distrl_core.policy.config import PolicyConfig
from distrl_core.policy.defaults import describe_defaults
from distrl_core.policy.model import Policy
from simulators.sim_env import SimDroidEnvConfig
from simulators.simdroid.device import SimDroidConfig
from simulators.warm_start import WarmStartConfig, collect_demonstrations, supervised_warm_start
from storage.registry import PolicyRegistry
from tasks.mlflow_metrics import start_tracked_run


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
    policy_config = policy_config or PolicyConfig()
    # a vision-language policy learns from the screenshots; rendering them is skipped otherwise
    screens = SimDroidConfig(distractor_prob=0.1)
    env = SimDroidEnvConfig(device=screens, screenshots=True, ui_xml=False) if policy_config.vision else None
    demos = collect_demonstrations(config, env=env)
    policy = Policy.create(policy_config)
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
