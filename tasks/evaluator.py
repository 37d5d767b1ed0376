"""The continuous evaluator's pieces: which version to score next, what is already scored, the
starting point of a training run's curve, and closing curves whose training has ended.

Which version: always the newest published version newer than the newest one scored. When the
evaluator keeps up (it scores a version before the learner publishes the next), that is every
version, in order; when it cannot, it skips the backlog and scores the newest, because the curve
should show where training is now (the evaluation lag stays one evaluation, not a growing queue),
and a skipped version is superseded by the one scored. The skipped ones are reported.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from distrl_core.envs.screen import ObservationKind
from simulators.evaluation import HELDOUT_SEED, outcomes_from_text, wilson_interval
from storage.registry import PolicyRegistry
from tasks import heldout_curve
from tasks.bounds import MAX_MINUTES, MAX_SECONDS, MAX_THREADS, Family, Split
from tasks.evaluation import OUTCOMES_TAG, PROTOCOL_TAG, evaluation_run, protocol_name

log = logging.getLogger(__name__)


class EvaluatorParams(BaseModel):
    """Parameters of the `evaluator` deployment (the continuous held-out evaluation)."""

    split: Split = Field(
        "test",
        description="Task split scored (test is held out; 'validation_words' scores the validation "
        "tasks carved from train, for choices made without the test split).",
    )
    family: Family | None = Field("general", description="Task family scored (None: every family).")
    episodes_per_task: int = Field(
        3, ge=1, le=20, description="Greedy episodes per task, each under its own env seed."
    )
    seed: int = Field(HELDOUT_SEED, description="Seed of the evaluation episodes (fixes the protocol).")
    parallel_envs: int = Field(
        16, ge=1, le=MAX_THREADS, description="SimDroid environments stepped together."
    )
    poll_seconds: float = Field(5.0, gt=0, le=MAX_SECONDS, description="How often to look for new versions.")
    max_minutes: float | None = Field(
        None, gt=0, le=MAX_MINUTES, description="Stop after this many minutes (None: until cancelled)."
    )
    min_improvement: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Promote to champion only when the lower end of the paired difference's 95 % "
        "interval exceeds this (0: better with confidence).",
    )

    observation: ObservationKind = Field(
        "tree",
        description="'tree' or 'screen': what the policy's elements are read from (an OCR of the "
        "screenshot under 'screen', a protocol of its own).",
    )

    @property
    def protocol(self) -> str:
        return protocol_name(self.split, self.family, self.episodes_per_task, self.seed, self.observation)

    def evaluation_args(self) -> dict[str, Any]:
        """`evaluate_version`'s arguments for this protocol: every version plays the same episodes."""
        return {
            "split": self.split,
            "family": self.family,
            "seed": self.seed,
            "episodes_per_task": self.episodes_per_task,
            "parallel_envs": self.parallel_envs,
            "observation": self.observation,
        }


def choose_next(published: Sequence[int], newest_scored: int | None) -> tuple[int | None, list[int]]:
    """(the version to score next or None, the versions skipped to get there)."""
    pending = sorted(v for v in published if newest_scored is None or v > newest_scored)
    if not pending:
        return None, []
    return pending[-1], pending[:-1]


def version_tags(registry: PolicyRegistry) -> dict[int, dict[str, str]]:
    """Every version's tags, in one registry query."""
    found = registry.client.search_model_versions(f"name = '{registry.name}'")
    return {int(mv.version): dict(mv.tags) for mv in found}


def newest_scored(tags: dict[int, dict[str, str]], protocol: str) -> int | None:
    """The newest version already scored under `protocol` (what a restarted evaluator resumes from)."""
    scored = [v for v, t in tags.items() if t.get(PROTOCOL_TAG) == protocol and OUTCOMES_TAG in t]
    return max(scored) if scored else None


def report_from_tags(
    version: int, tags: dict[str, str], protocol: str, registry: PolicyRegistry | None = None
) -> dict | None:
    """A scored version's result rebuilt from its tags (for a curve's starting point); with
    `registry`, its per-family rates too, from the version's evaluation run under `protocol`."""
    if tags.get(PROTOCOL_TAG) != protocol or OUTCOMES_TAG not in tags:
        return None
    outcomes = outcomes_from_text(tags[OUTCOMES_TAG])
    low, high = wilson_interval(sum(outcomes), len(outcomes))
    run = evaluation_run(registry, version, protocol) if registry is not None else None
    families, family_ci = family_scores(run.data.metrics if run is not None else {})
    return {
        "version": version,
        "protocol": protocol,
        "success": sum(outcomes) / max(1, len(outcomes)),
        "ci_low": low,
        "ci_high": high,
        "families": families,
        "family_ci": family_ci,
    }


def family_scores(metrics: dict[str, float]) -> tuple[dict[str, float], dict[str, tuple[float, float]]]:
    """Per-family rates and intervals from an evaluation run's metrics (`heldout_success_<family>`)."""
    prefix = "heldout_success_"
    families = {k.removeprefix(prefix): v for k, v in metrics.items() if k.startswith(prefix)}
    nan = float("nan")
    family_ci = {
        f: (metrics.get(f"heldout_ci_low_{f}", nan), metrics.get(f"heldout_ci_high_{f}", nan))
        for f in families
    }
    return families, family_ci


def start_point_logged(registry: PolicyRegistry, training_run: str, protocol: str, version: int) -> bool:
    """Whether the training run's curve already holds its starting version."""
    run = heldout_curve.curve_run(registry, training_run, protocol)
    return any(p.step == version for p in registry.client.get_metric_history(run, "heldout_success"))


def close_ended_curves(registry: PolicyRegistry, protocol: str, newest: int | None) -> list[str]:
    """Finish the curve runs whose training run has ended and whose last version is scored (or
    superseded by a newer scored one); returns the names of those finished."""
    open_curves = registry.client.search_runs(
        [registry.experiment_id()],
        f"tags.role = '{heldout_curve.CURVE_ROLE}' and tags.protocol = '{protocol}' "
        "and attributes.status = 'RUNNING'",
    )
    if not open_curves:
        return []
    last_of: dict[str, int] = {}
    for version, tags in version_tags(registry).items():
        run = tags.get("run_id")
        if run:
            last_of[run] = max(version, last_of.get(run, 0))
    closed = []
    for curve in open_curves:
        training = curve.data.tags.get("training_run", "")
        if not training or registry.client.get_run(training).info.status == "RUNNING":
            continue
        if newest is not None and last_of.get(training, 0) <= newest:
            registry.client.set_terminated(curve.info.run_id)
            closed.append(curve.info.run_name)
    return closed
