"""`TrainLocalParams`: what the embedded run (`flows.train_local`) takes, and the task sets it
trains on and scores, derived from it in one place."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

from distrl_core.envs.screen import ObservationKind
from distrl_core.policy.config import SUBWORD_BASES, CandidateReading, Vocabulary
from simulators.simdroid.tasks import TRAINED_BESIDE
from storage.replay_config import ReplaySettings
from tasks.bounds import (
    MAX_ENCODER_LAYERS,
    MAX_MINUTES,
    MAX_SECONDS,
    MAX_SEED,
    MAX_THREADS,
    MAX_UPDATES,
    Family,
    Split,
    ValidationSplit,
)
from tasks.evaluator import EvaluatorParams
from tasks.learner import LearnerParams


class TrainLocalParams(BaseModel):
    """Parameters of the embedded run (every field has a demo-sized default)."""

    collectors: int = Field(
        4, ge=1, le=MAX_THREADS, description="Collector threads (two agent pools, alternating)."
    )
    envs_per_collector: int = Field(
        4, ge=1, le=MAX_THREADS, description="SimDroid environments per collector."
    )
    minutes: float = Field(6.0, gt=0, le=MAX_MINUTES, description="Wall-clock budget of the RL phase.")
    family: Family | None = Field(
        "general",
        description="Task family trained and evaluated: general or webshop (None, from Python or a deployment: both).",
    )
    sync: bool = Field(False, description="DigiRL-style barrier rounds instead of asynchronous collection.")
    learner: LearnerParams = Field(
        default_factory=lambda: LearnerParams(background_ingest=True),
        description="Learner settings (sync runs always ingest before training: that is the barrier).",
    )
    replay: ReplaySettings = Field(
        default_factory=lambda: ReplaySettings(min_size_steps=200, samples_per_insert=None)
    )
    step_latency_s: float = Field(
        0.05,
        ge=0,
        le=MAX_SECONDS,
        description="Emulator-like median step latency of SimDroid (sleeps; frees CPU for the learner).",
    )
    task_latency_sigma: float = Field(
        0.0,
        ge=0,
        le=10,
        description="Per-episode lognormal spread of the step latency (emulator task durations vary ~100x).",
    )
    store_uri: str | None = Field(None, description="Trajectory store (default: DISTRL_STORE_URI).")
    observation: ObservationKind = Field(
        "tree",
        description="What the warm start's demonstrations, collectors and the evaluator read elements "
        "from: the UI dump ('tree') or an OCR of the screenshot ('screen'; the warm start's expert then acts "
        "through the OCR's elements, every demonstrated step read by the OCR: WarmStartConfig.observation).",
    )
    warm_start_updates: int = Field(
        300,
        ge=0,
        le=MAX_UPDATES,
        description="SFT updates of the warm start (when no version exists). 60 leave set_alarm's editor "
        "unsolved, which RL then never discovers; 300 fit it, won on the validation split and raised the "
        "demo's final held-out success from 67 % to 82 % (docs/performance.md, 'The demo over five seeds'). "
        "A pretrained base on a CPU needs far fewer (e.g. 4).",
    )
    warm_start_noise: float = Field(
        0.3, ge=0, le=1, description="Noise of the scripted expert's demonstrations."
    )
    paraphrase: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Probability that a training episode's instruction (the warm start's demonstrations and "
        "the collectors' episodes) is replaced by a paraphrase: another phrasing SimDroid's free-text parser "
        "reads as the same task (simulators.simdroid.paraphrase). Held-out scores keep the tasks' own texts.",
    )
    base: str | None = Field(
        None,
        description="Pretrained base of the warm start's policy: 'minilm' (the packaged all-MiniLM-L6-v2 "
        "encoder, top layer trained; what --pretrained picks), 'tiny-minilm' (the tiny model on MiniLM's "
        "WordPiece sub-words and projected word-piece embeddings: an update costs the tiny model's), "
        "'tiny-minilm-sem' (the same plus MiniLM's sentence similarity of each screen element to the "
        "instruction as an input feature), 'tiny-minilm-apps' (that similarity for the launcher's app icons "
        "alone), 'tiny-minilm-controls' (the app icons and the labels on the routes to the device's "
        "controls; '-words-controls' one position per word, '-words-values' that with the routes to a field or "
        "slider read without the value to type or set), 'tiny-minilm-ctx' (the same plus MiniLM's contextual token states "
        "of each prompt segment, cached per text, through a trained map), 'smollm2' (SmolLM2-135M with LoRA) or a Hugging "
        "Face folder (`distrl pretrained` prepares both; a vision-language one, whose config has a vision_config, "
        "reads the screenshots, which the collectors then store); learning rates and micro-batches follow from it "
        "(printed). None or 'tiny': the tiny default on its own word vocabulary (`distrl demo` defaults to "
        "'tiny-minilm-words-values', and to 'tiny-minilm' with --family webshop).",
    )
    encoder_layers: int | None = Field(
        None,
        ge=0,
        le=MAX_ENCODER_LAYERS,
        description="An encoder base's top transformer layers trained (None: its default, 1; 0: the heads "
        "alone on the frozen encoder, an update ~16x cheaper on a CPU). Needs an encoder base.",
    )
    encoder_candidates: CandidateReading | None = Field(
        None,
        description="How an encoder base reads a candidate action: 'pooled' (its text encoded alone, "
        "compared with the instruction's summary) or 'spans' (read in place in the encoded screen, where "
        "it has attended to the instruction: a cross-encoder, as the tiny model is). None: 'pooled'. "
        "Needs an encoder base.",
    )
    evaluate: bool = Field(
        True,
        description="Evaluate on the held-out split: the warm start first, then every version as it is "
        "published (the continuous evaluator, the newest when it cannot keep up), the last one included.",
    )
    evaluator: EvaluatorParams | None = Field(
        None,
        description="The continuous evaluator's protocol (None: the held-out split of `family`, 3 episodes "
        "per task, the fixed evaluation seed).",
    )
    evaluator_process: bool = Field(
        True,
        description="Run the continuous evaluator in a child process (False: a thread of this process). "
        "A thread shares the interpreter lock with the learner and the collectors, so scoring slowed "
        "training whatever its niceness; a process at `evaluator_nice` scores with the CPU they leave, "
        "as a deployment's evaluator on its own work pool does.",
    )
    evaluator_nice: int = Field(
        19,
        ge=0,
        le=19,
        description="Niceness of the evaluator's process or thread (Linux; 0: as the rest): it shares "
        "the machine's cores with collectors and the learner, and scores with the CPU they leave.",
    )
    validation: bool = Field(
        False,
        description="Make choices without the test split: the warm start's demonstrations, the collectors, "
        "the tiny policy's vocabulary and the in-distribution score use the 'fit_words' tasks, and every "
        "held-out score (the continuous evaluator, before and after) is on 'validation_words' (train "
        "templates holding words no fit task has; `validation_split` picks another selection). The "
        "test split is never loaded.",
    )
    validation_split: ValidationSplit = Field(
        "validation_words",
        description="The held-out selection `validation` scores, and the fit tasks trained beside it: "
        "'validation_words' (train templates whose words no fit template has; fit_words) or "
        "'validation_unseen' (each kind's held-out template *and* every fourth of its parameters: "
        "apps, queries, times..., as test holds out both; fit_unseen). Needs validation.",
    )
    seed: int = Field(
        0,
        ge=0,
        le=MAX_SEED,
        description="Seeds the warm start (demonstrations, initial weights, batch order), the collectors' "
        "task draws and environments, the learner and its replay sampling. The warm start and the "
        "evaluations are exact on a re-run; the asynchronous phase is not (which collector's episodes "
        "the learner sees first depends on thread timing).",
    )

    @model_validator(mode="after")
    def _held_out_split_matches(self) -> TrainLocalParams:
        for name in ("encoder_layers", "encoder_candidates"):
            tiny = self.base is None or self.base.lower() in SUBWORD_BASES
            if getattr(self, name) is not None and tiny:
                raise ValueError(
                    f"{name} applies to an encoder base: add base='minilm' (--pretrained) or leave "
                    f"{name} out for the tiny default (or base={self.base!r})"
                )
        if not self.validation and self.validation_split != "validation_words":
            raise ValueError(
                f"validation_split={self.validation_split!r} applies only to a validation run: set "
                "validation as well, or leave validation_split out to score the test split"
            )
        scored = scored_split(self)
        if self.validation and self.evaluator is not None and self.evaluator.split != scored:
            raise ValueError(
                f"validation=True scores {scored!r}, but evaluator.split is "
                f"{self.evaluator.split!r}: leave evaluator None or set its split to {scored!r}"
            )
        return self


def scored_split(params: TrainLocalParams) -> Split:
    """The held-out tasks a run scores by default: test, or its validation selection."""
    return params.validation_split if params.validation else "test"


def trained_split(params: TrainLocalParams) -> Vocabulary:
    """The tasks the run learns from (demonstrations, collectors, the tiny vocabulary): those
    trained beside its held-out selection (train beside test, fit_words beside validation_words...)."""
    return TRAINED_BESIDE[scored_split(params)]


def heldout_split(params: TrainLocalParams) -> str:
    """The tasks every held-out score of the run is on (its evaluator's protocol)."""
    return evaluator_params(params).split


def evaluator_params(params: TrainLocalParams) -> EvaluatorParams:
    """The continuous evaluator's protocol: the one given, else the held-out split's default."""
    if params.evaluator is not None:
        return params.evaluator
    return EvaluatorParams(
        family=params.family, split=scored_split(params), poll_seconds=2.0, observation=params.observation
    )
