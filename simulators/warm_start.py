"""Warm start: supervised fine-tuning on demonstrations of the noisy scripted expert.

DistRL and DigiRL start RL from AutoUI, a model already fine-tuned on human demonstrations that
solves a fraction of the tasks. Here the demonstrations come from SimDroid's scripted expert with
``noise`` (random plausible actions mixed in, so the data holds mistakes and recoveries), on the
train split only, and the SFT budget is kept small: the point is a policy with modest held-out
success that RL then improves, not an imitation of the expert.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from distrl_core.algos.masking import masked_mean
from distrl_core.envs.protocol import Task
from distrl_core.envs.screen import OBSERVATION_KINDS, ObservationKind
from distrl_core.learner.batch import StepBatch
from distrl_core.learner.precision import refuse_outer_autocast
from distrl_core.policy.defaults import training_defaults
from distrl_core.policy.model import Policy
from simulators.rollout import RolloutConfig, RolloutResult, expert_actor, run_episodes
from simulators.sim_env import SimDroidEnvConfig
from simulators.simdroid.device import SimDroidConfig
from simulators.simdroid.paraphrase import paraphrase_tasks, validate_probability
from simulators.simdroid.tasks import load_tasks

__all__ = ["WarmStartConfig", "collect_demonstrations", "supervised_warm_start"]

TRAIN_SETS = ("train", "fit", "fit_words", "fit_unseen")  # the task sets a warm start may learn from


@dataclass
class WarmStartConfig:
    """Settings of the warm start.

    - ``family``: task family of the demonstrations (None: both). ``split``: their tasks, "train"
      or a selection carved from it ("fit_words" leaves the validation_words tasks unseen; see
      ``load_tasks``). ``episodes_per_task``: demos per task. ``noise``: the expert's probability of a random plausible action per step.
    - ``updates``/``batch_size``/``lr``: SFT steps, trajectories per step, AdamW learning rate.
      The default budget is small on purpose (docs/performance.md has what it reaches).
    - ``successful_only``: train only on demonstrations that reached the goal.
    - ``entity_dropout``/``word_dropout``/``phrasing_dropout``: word dropout during SFT (see
      Policy.with_word_dropout); what makes the warm start generalise to held-out apps, sites
      and phrasings.
    - ``seed``: demonstrations and batch order.
    - ``backbone_lr``/``micro_batch_size``/``max_micro_batch_tokens``: None picks them from the
      base (policy.defaults.training_defaults): the tiny default trains backbone and heads at
      ``lr`` on the whole batch at once; a pretrained base trains its LoRA adapter at 2e-4, the
      heads at ``lr``, and accumulates gradients over micro-batches of trajectories so that the
      memory of a step stays bounded however large ``batch_size`` and the prompts are.
    - ``distill_weight``: weight of the distillation loss (``policy.distill``): the tiny model's
      pooled instruction state, through a learned linear map, pulled towards the frozen encoder's
      sentence embedding of the instruction (cosine distance). 0 (the default): none. Needs a policy
      on an encoder's sub-words (``PolicyConfig.subwords``, base "tiny-minilm"), whose encoder gives
      the targets, trained on whole batches (no micro-batching).
    - ``observation``: what the demonstrations' observations read elements from: the UI dump
      ("tree", the default) or an OCR of the screenshot ("screen"), as the run's collectors and
      evaluator do (``TrainLocalParams.observation``). A policy trained on the tree's elements meets
      other text on the screen (upper-case titles, fused words, no icon-only elements) and starts
      far lower there; on "screen" the expert acts through the OCR's elements
      (``screen_env.on_screen``), so SFT learns the taps the screen offers. Its cost is CPU: every
      demonstrated step's screenshot is read by the OCR (~0.65 s for a screen never read before,
      far less once its bands and lines are cached), by the process's one reader
      (``simulators.ocr.shared_reader``), whose caches the run's collectors then reuse.
    - ``paraphrase``: probability (0-1) that a demonstration's instruction is replaced by a
      paraphrase (``simulators.simdroid.paraphrase``: another request frame, verb, word order, time
      or percentage form, read back by the free-text parser as the same task); the task's params,
      and so the success rules, stay. 0 (the default): the templates' texts only. The tiny-minilm
      base reads new words through MiniLM's fixed word-piece table; the word-vocabulary ``tiny``
      base keeps the vocabulary fitted on the train tasks' texts, so a paraphrase's words outside it
      read as the unknown word (as a held-out phrasing's do).
    """

    family: str | None = "general"
    split: str = "train"
    episodes_per_task: int = 1
    noise: float = 0.3
    updates: int = 40
    batch_size: int = 16
    lr: float = 1e-3
    successful_only: bool = False
    entity_dropout: float = 0.5
    word_dropout: float = 0.1
    phrasing_dropout: float | None = None  # None: as word_dropout
    seed: int = 0
    backbone_lr: float | None = None
    micro_batch_size: int | None = None
    max_micro_batch_tokens: int | None = None
    distill_weight: float = 0.0
    observation: ObservationKind = "tree"
    paraphrase: float = 0.0

    def __post_init__(self) -> None:
        validate_probability("WarmStartConfig", self.paraphrase)
        if not 0.0 <= self.noise <= 1.0:
            raise ValueError(f"WarmStartConfig.noise is a probability, got {self.noise}")
        if self.episodes_per_task < 1 or self.updates < 0 or self.batch_size < 1 or not self.lr > 0:
            raise ValueError(
                "WarmStartConfig needs episodes_per_task >= 1, updates >= 0, batch_size >= 1 and lr > 0"
            )
        if self.split not in TRAIN_SETS:
            raise ValueError(
                f"WarmStartConfig.split must be one of {TRAIN_SETS} (demonstrations never come from "
                f"held-out tasks), got {self.split!r}"
            )
        if not self.distill_weight >= 0:
            raise ValueError(
                f"WarmStartConfig.distill_weight must be >= 0 (0: none), got {self.distill_weight}"
            )
        if self.observation not in OBSERVATION_KINDS:
            raise ValueError(
                f"WarmStartConfig.observation must be one of {OBSERVATION_KINDS}, got {self.observation!r}"
            )
        for name in ("backbone_lr", "micro_batch_size", "max_micro_batch_tokens"):
            if getattr(self, name) is not None and not getattr(self, name) > 0:
                raise ValueError(f"WarmStartConfig.{name} must be None (from the base) or > 0")


def collect_demonstrations(
    config: WarmStartConfig, tasks: Sequence[Task] | None = None, env: SimDroidEnvConfig | None = None
) -> RolloutResult:
    """Noisy-expert episodes on ``config.split`` (``tasks`` overrides), as schema rows; under
    ``config.observation="screen"`` observed through the OCR (``env`` is then read from its
    screenshots: see ``WarmStartConfig``). With ``config.paraphrase``, each episode's instruction
    is paraphrased with that probability (its own draws: 0 leaves the episodes as they were)."""
    tasks = list(tasks) if tasks is not None else load_tasks(config.family, config.split)
    env = env or SimDroidEnvConfig(
        device=SimDroidConfig(distractor_prob=0.1), screenshots=False, ui_xml=False
    )
    actor = expert_actor(config.noise, config.seed)
    if config.observation == "screen":
        from simulators.screen_env import screen_expert_actor

        env = dataclasses.replace(env, observation="screen")
        actor = screen_expert_actor(config.noise, config.seed)
    rollout = RolloutConfig(env=env, parallel_envs=1, seed=config.seed, policy_name="scripted-expert")
    episodes = paraphrase_tasks(
        tasks * config.episodes_per_task, config.paraphrase, random.Random(f"paraphrase/{config.seed}")
    )
    return run_episodes(actor, episodes, rollout)


def supervised_warm_start(
    policy: Policy, rows: Sequence[dict[str, Any]], config: WarmStartConfig | None = None
) -> list[dict[str, float]]:
    """SFT of the actor: −mean log π of the demonstrated actions the policy can express (actions
    outside its candidate set are skipped). The critics are left alone: fitted to the expert's
    returns they would badly overestimate the warm-started policy's. Returns per-update metrics."""
    config = config or WarmStartConfig()
    refuse_outer_autocast("supervised_warm_start")
    episodes: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row["episode_success"] or not config.successful_only:
            episodes.setdefault(row["episode_id"], []).append(row)
    if not episodes:
        raise ValueError("no demonstrations to learn from (all failed and successful_only is set?)")
    keys = sorted(episodes)
    rng = random.Random(config.seed)
    torch.manual_seed(config.seed)  # word dropout draws from torch's global generator
    optimizer = warm_start_optimizer(policy, config)
    micro = warm_start_micro_batching(policy, config)
    distill = _distillation(policy, config, micro is not None)
    if distill is not None:
        optimizer.add_param_group({"params": list(distill.projection.parameters()), "lr": config.lr})
    history = []
    policy.train()
    with policy.with_word_dropout(config.entity_dropout, config.word_dropout, config.phrasing_dropout):
        for _ in range(config.updates):
            chosen = rng.sample(keys, min(config.batch_size, len(keys)))
            trajectories = [episodes[key] for key in chosen]
            optimizer.zero_grad(set_to_none=True)
            if micro is None:  # the tiny default: one graph over the whole batch
                metrics = _sft_backward(
                    policy, [row for rows in trajectories for row in rows], distill=distill
                )
            else:
                metrics = _sft_backward_accumulated(policy, trajectories, *micro)
            optimizer.step()
            history.append(metrics)
    policy.eval()
    return history


def warm_start_optimizer(policy: Policy, config: WarmStartConfig) -> torch.optim.Optimizer:
    """AdamW over the actor; a pretrained base's adapter gets its own (smaller) learning rate."""
    backbone_lr = config.backbone_lr or training_defaults(policy.config).backbone_lr
    return torch.optim.AdamW(policy.actor_parameter_groups(config.lr, backbone_lr), lr=config.lr)


def warm_start_micro_batching(policy: Policy, config: WarmStartConfig) -> tuple[int, int | None] | None:
    """(trajectories, prompt tokens) per micro-batch, or None for one graph over the whole batch."""
    defaults = training_defaults(policy.config)
    size = config.micro_batch_size or defaults.micro_batch_size
    tokens = config.max_micro_batch_tokens or defaults.max_micro_batch_tokens
    if size is None and tokens is None:
        return None
    return size or config.batch_size, tokens


def _sft_backward(
    policy: Policy, rows: list[dict[str, Any]], accumulate: bool = False, distill: Distillation | None = None
) -> dict[str, float]:
    """Backward of −mean log π over ``rows`` (of the demonstrated actions the policy can express),
    plus the weighted distillation loss when given; with ``accumulate`` the backward is of the sum,
    and the caller divides by the batch's count."""
    batch = StepBatch.from_rows(rows).to(policy.device)
    out = policy.evaluate(batch)
    usable = batch.mask & out.known
    if not accumulate:
        nll = -masked_mean(out.logp, usable)
        total, extra = nll, {}
        if distill is not None:
            extra["distill"] = distill.loss(policy, batch.steps)
            total = nll + distill.weight * extra["distill"]
        total.backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward unannotated
        return {
            "nll": float(nll.detach()),
            "entropy": float(masked_mean(out.entropy.detach(), batch.mask)),
            "known_fraction": float(usable.sum()) / max(int(batch.mask.sum()), 1),
        } | {name: float(value.detach()) for name, value in extra.items()}
    nll_sum = -torch.where(usable, out.logp, torch.zeros_like(out.logp)).sum()
    nll_sum.backward()  # type: ignore[no-untyped-call]
    return {
        "nll": float(nll_sum.detach()),
        "entropy": float((out.entropy.detach() * batch.mask).sum()),
        "usable": float(usable.sum()),
        "steps": float(batch.mask.sum()),
    }


@dataclass
class Distillation:
    """The warm start's distillation: the encoder's cached sentence targets, the learned map from
    the tiny model's width to the encoder's, and the loss's weight."""

    targets: Any  # policy.distill.SentenceTargets
    projection: torch.nn.Linear
    weight: float

    def loss(self, policy: Policy, steps: Sequence[Any]) -> torch.Tensor:
        """The cosine distance over the batch's distinct instructions (each counted once)."""
        from distrl_core.policy.distill import distill_loss, instruction_states

        first = {s.instruction: s for s in steps}  # one step per instruction: its prefix is the same
        encoded = [policy.encode(s.instruction, s.observation_text, s.history) for s in first.values()]
        student = instruction_states(policy.parts(), encoded)  # (B, D)
        return distill_loss(student, self.projection, self.targets(list(first)).to(student.device))


def _distillation(policy: Policy, config: WarmStartConfig, micro_batched: bool) -> Distillation | None:
    if config.distill_weight == 0:
        return None
    if policy.config.subwords is None or micro_batched:
        raise ValueError(
            "WarmStartConfig.distill_weight needs a tiny policy on an encoder's sub-words (base 'tiny-minilm', "
            "PolicyConfig.subwords), trained on whole batches: set distill_weight=0 for this policy"
        )
    from distrl_core.policy.distill import SentenceTargets

    targets = SentenceTargets(policy.config.subwords.source)
    width = targets.compute(["task"]).shape[-1]
    with torch.random.fork_rng(devices=[]):  # the map's draws leave the run's random stream as it was
        torch.manual_seed(config.seed + 3)
        projection = torch.nn.Linear(policy.config.tiny.hidden_size, width).to(policy.device)
    return Distillation(targets, projection, config.distill_weight)


def _prompt_tokens(policy: Policy, rows: list[dict[str, Any]]) -> int:
    steps = StepBatch.from_rows(rows).steps  # rebuilds each step's action history like the learner
    return sum(len(policy.encode(s.instruction, s.observation_text, s.history).input_ids) for s in steps)


def micro_batches(
    policy: Policy, trajectories: list[list[dict[str, Any]]], size: int, max_tokens: int | None
) -> list[list[dict[str, Any]]]:
    """Consecutive groups of at most ``size`` trajectories and ``max_tokens`` prompt tokens (a
    longer trajectory forms a group alone), as flat row lists."""
    groups: list[list[dict[str, Any]]] = []
    count = tokens = 0
    for rows in trajectories:
        cost = _prompt_tokens(policy, rows) if max_tokens else 0
        if not groups or count >= size or (max_tokens and tokens + cost > max_tokens):
            groups.append([])
            count = tokens = 0
        groups[-1].extend(rows)
        count, tokens = count + 1, tokens + cost
    return groups


def _sft_backward_accumulated(
    policy: Policy, trajectories: list[list[dict[str, Any]]], size: int, max_tokens: int | None
) -> dict[str, float]:
    """Gradient accumulation over micro-batches: the gradient of the batch's −mean log π, with
    the memory of one micro-batch's graph. Each micro-batch back-propagates its sum; the
    accumulated gradients are divided by the batch's count of usable steps at the end."""
    sums = {"nll": 0.0, "entropy": 0.0, "usable": 0.0, "steps": 0.0}
    for rows in micro_batches(policy, trajectories, size, max_tokens):
        for name, value in _sft_backward(policy, rows, accumulate=True).items():
            sums[name] += value
    usable = max(sums["usable"], 1.0)
    for parameter in policy.actor_parameters():
        if parameter.grad is not None:
            parameter.grad.div_(usable)
    return {
        "nll": sums["nll"] / usable,
        "entropy": sums["entropy"] / max(sums["steps"], 1.0),
        "known_fraction": sums["usable"] / max(sums["steps"], 1.0),
    }
