"""The `retrain` flow: fine-tune `champion` on recent data, evaluate, promote only if it is better.

Meant for a schedule (the `retrain` deployment runs nightly): start from the version behind
`start_policy` (default `champion`; `latest`, with a warning, when no champion exists yet), build a
fresh replay from the shards of the last `recent_days` UTC days (by their `date=` partition, see
`tasks.retrain`), train exactly `updates` updates, publish the result as a new version tagged
`retrain=true` and `parent_version=<start>`, evaluate it on the held-out split, and move `champion`
to it only if it beats the champion on the same episodes with confidence: the lower end of the 95 %
interval of the paired difference exceeds `min_improvement` (distrl_core.learner.champion).

`latest` moves. The candidate is published in the same registered model as every other version
(so promotion is only an alias move and the lineage stays in one place), and MLflow's `latest` is
simply the highest version: collectors that follow `latest` switch to the candidate as soon as it is
published, before it has been evaluated, and a restarted `learn` flow resumes from it. In a setup
with scheduled retraining, deploy collectors with `policy_alias: champion`, so that they only ever
run vetted versions, and do not run the continuous `learn` deployment on the same registered model.
The candidate's tags say what it is either way, and a rejected candidate is never promoted.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from prefect import flow, get_run_logger
from pydantic import BaseModel, Field, field_validator

from distrl_core.learner.config import Algorithm
from storage.registry import CHAMPION
from tasks.bounds import MAX_BATCH, MAX_DAYS, MAX_SEED, MAX_UPDATES, Family, Split
from tasks.evaluation import evaluate_version, record_evaluation
from tasks.learner import (
    LearnerParams,
    close_learner,
    ingest_shards,
    publish_policy,
    train_block,
)
from tasks.learner_params import check_learner_config
from tasks.retrain import (
    DayWindow,
    RetrainDataError,
    current_champion,
    limit_next_block,
    open_retrain_learner,
    replay_settings,
    resolve_start_version,
    tag_candidate,
    window_summary,
)


class RetrainParams(BaseModel):
    """Parameters of the `retrain` deployment."""

    start_policy: str = Field(
        CHAMPION,
        description="Alias or version number to fine-tune from. With 'champion' and no champion yet, "
        "'latest' is used (logged as a warning); an empty registry is an error.",
    )
    recent_days: int = Field(
        7,
        ge=1,
        le=MAX_DAYS,
        description="Train on shards whose date=<yyyy-mm-dd> partition (the UTC day the collector wrote "
        "them) is one of the last N days up to `as_of`, both ends included (1: that day only).",
    )
    as_of: date | None = Field(
        None, description="Last day of the window (None: today in UTC, when the run starts)."
    )
    updates: int = Field(
        200, ge=1, le=MAX_UPDATES, description="Learner updates of the fine-tune (exactly this many)."
    )
    batch_size: int = Field(16, ge=1, le=MAX_BATCH, description="Trajectories per update.")
    window: int | None = Field(
        None, ge=1, le=MAX_BATCH, description="Steps per sampled window (None: whole trajectories)."
    )
    updates_per_block: int = Field(
        25,
        ge=1,
        le=MAX_UPDATES,
        description="Updates per `train_block` task run (what the Prefect UI shows).",
    )
    algorithm: Algorithm = Field("aride", description=LearnerParams.model_fields["algorithm"].description)
    seed: int = Field(0, ge=0, le=MAX_SEED, description="Seeds the learner.")
    learner_config: dict[str, Any] = Field(
        default_factory=dict,
        description="Overrides of LearnerConfig fields, e.g. {'actor_lr': 1e-4, 'critic_warmup_updates': 0} "
        "(the warm-up trains only the critics for its first updates: keep it below `updates`).",
    )
    replay: dict[str, Any] = Field(
        default_factory=dict,
        description="Overrides of ReplaySettings fields (e.g. {'min_size_steps': 500, 'max_policy_lag': 5}); "
        "a retrain defaults to learner_id='retrain' and no sample-to-insert limit, always in memory.",
    )
    split: Split = Field("test", description="Split the candidate (and the champion) are evaluated on.")
    family: Family | None = Field(None, description="Task family evaluated (None: all families).")
    min_improvement: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="Promote only if the lower end of the 95 % interval of the paired difference (candidate "
        "minus champion, on the same episodes) exceeds this (0: better with confidence).",
    )
    reevaluate_champion: bool = Field(
        True,
        description="Evaluate the champion on the same split and family first, so both are compared "
        "on one protocol (its recorded success may come from another split or family, or be missing; "
        "a champion never evaluated is otherwise beaten by any candidate).",
    )
    store_uri: str | None = Field(None, description="Trajectory store (default: DISTRL_STORE_URI).")

    _check_learner_config = field_validator("learner_config")(check_learner_config)

    @field_validator("replay")
    @classmethod
    def _check_replay(cls, value: dict[str, Any]) -> dict[str, Any]:
        replay_settings(value)
        return value

    def learner_params(self) -> LearnerParams:
        return LearnerParams(
            batch_size=self.batch_size,
            window=self.window,
            updates_per_block=min(self.updates_per_block, self.updates),
            max_updates=self.updates,
            store_uri=self.store_uri,
            background_ingest=False,  # ingest the window now: training starts from all of it
            algorithm=self.algorithm,
            seed=self.seed,
            learner_config=self.learner_config,
        )


def run_name(params: dict[str, Any] | RetrainParams | None) -> str:
    """`retrain-<algorithm>-from-<start policy>-<N>d-<updates>-updates`, e.g.
    retrain-aride-from-champion-7d-200-updates: what the run does, readable in Prefect's list."""
    if isinstance(params, RetrainParams):
        params = params.model_dump()
    given, defaults = params or {}, RetrainParams()
    fields = ("algorithm", "start_policy", "recent_days", "updates")
    value = {k: given.get(k) or getattr(defaults, k) for k in fields}
    return "retrain-{algorithm}-from-{start_policy}-{recent_days}d-{updates}-updates".format(**value)


def _run_name() -> str:
    from prefect.runtime import flow_run

    return run_name(flow_run.get_parameters().get("params"))


@flow(name="retrain", flow_run_name=_run_name)
def retrain(params: RetrainParams | None = None) -> dict[str, Any]:
    """Fine-tune a version (default `champion`) on recent shards, publish, evaluate, promote if better.

    Args:
        params: start version, window of recent days, updates, learner and replay overrides,
            evaluation split/family, and the margin needed to promote (see `RetrainParams`).

    Returns the start and candidate versions, what was ingested, both success rates and `promoted`.
    """
    params = params or RetrainParams()
    logger = get_run_logger()
    start, resolved_from = resolve_start_version(params.start_policy)
    if resolved_from != params.start_policy:
        logger.warning(
            "no %r version yet: fine-tuning %s (v%d) instead", params.start_policy, resolved_from, start
        )
    window = DayWindow.ending(params.as_of or datetime.now(UTC).date(), params.recent_days)
    session = open_retrain_learner(
        params.learner_params(),
        params.learner_params().to_learner_config(),
        replay_settings(params.replay),
        start_version=start,
        window=window,
        run_tags={"start_policy": params.start_policy},
    )
    try:
        data = ingest_shards(session) | window_summary(session)
        min_steps = replay_settings(params.replay).min_size_steps
        if data["replay_steps"] < max(1, min_steps):
            raise RetrainDataError(
                f"the window {window} holds {data['replay_steps']} trainable steps in {data['shards']} shards "
                f"({data['shards_outside_window']} shards lie outside it); sampling needs "
                f"min_size_steps={min_steps}. Widen recent_days, or lower replay.min_size_steps."
            )
        logger.info("window %s: %s", window, data)
        while (done := session.learner.updates) < params.updates:
            limit_next_block(session, params.updates - done)
            if train_block(session).get("waiting"):
                raise RetrainDataError(
                    f"the replay stopped serving samples after {done} updates (all trajectories older than "
                    "replay.max_policy_lag, or a sample-to-insert limit set in replay): a retrain trains on a "
                    "fixed window, so waiting would never end. Raise max_policy_lag or unset samples_per_insert."
                )
        candidate = publish_policy(session)
    finally:
        close_learner(session)
    tags = tag_candidate(candidate, str(window))
    logger.info("published candidate v%d (from v%d, %s)", candidate, start, tags)

    if params.reevaluate_champion:
        champion, _ = current_champion()
        # With no champion yet, the start version is evaluated and `record_evaluation` makes it the
        # first champion, so the candidate has to beat its parent.
        baseline = start if champion is None else champion
        record_evaluation(evaluate_version(baseline, split=params.split, family=params.family))
    champion, champion_success = current_champion()
    report = evaluate_version(candidate, split=params.split, family=params.family)
    promoted = record_evaluation(report, min_improvement=params.min_improvement)
    logger.info(
        "candidate v%d: held-out success %.3f vs champion v%s at %s (margin %.3f): %s",
        candidate,
        report["success"],
        champion,
        "never evaluated" if champion_success is None else f"{champion_success:.3f}",
        params.min_improvement,
        "promoted" if promoted else "not promoted",
    )
    return {
        "start_version": start,
        "start_resolved_from": resolved_from,
        "candidate_version": candidate,
        "window": str(window),
        "data": data,
        "updates": params.updates,
        "champion_version": champion,
        "champion_success": champion_success,
        "candidate_success": report["success"],
        "min_improvement": params.min_improvement,
        "promoted": promoted,
    }
