"""What a learning-curve run needs to know, built in one place for every bench that runs one.

`bench.learning_curve` and `bench.staleness` both start warm starts and method runs in worker
processes (`warm_start_job`, `method_job`). Those jobs read a `CurveSettings`, not a loose dict, and
both benches build it from their command line with `add_curve_arguments` and `curve_settings`: a
field one bench forgot is then a missing argument at start-up, not a `KeyError` in every worker an
hour in.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from distrl_core.envs.protocol import Task
from distrl_core.learner import LearnerConfig
from distrl_core.learner.config import ALGORITHMS, Algorithm
from distrl_core.learner.losses import field_readers
from distrl_core.policy import PolicyConfig
from distrl_core.policy.config import policy_config_for
from distrl_core.policy.pretrained import is_encoder_folder, resolve_base
from simulators.simdroid.tasks import TRAINED_BESIDE, load_tasks
from simulators.warm_start import WarmStartConfig


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["actor_lr=1e-3", "normalize_advantages=False"]`` -> {"actor_lr": 0.001, ...}."""
    overrides: dict[str, Any] = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            overrides[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            overrides[key] = value
    return overrides


@dataclass(frozen=True)
class CurveSettings:
    """One learning-curve run's protocol, shared by every method of a bench."""

    env_steps: int
    """Environment-step budget of each method run."""
    episodes_per_round: int = 32
    """Episodes collected per round (LoopConfig.episodes_per_round)."""
    updates_per_round: int = 8
    """Learner updates per round; the loop publishes one policy version per round."""
    group_size: int = 4
    """Episodes per task and env seed in a collection group (gigpo's groups; LoopConfig.group_size)."""
    eval_tasks: int | None = None
    """Evaluate on the first N held-out tasks only (smoke runs); None: all of them."""
    eval_episodes: int = 2
    """Greedy episodes per held-out task per evaluation."""
    train_eval_tasks: int = 0
    """Also evaluate on this many train tasks (0: not)."""
    warm_start_updates: int = 40
    """SFT updates of the warm start every method of a seed starts from."""
    warm_start_noise: float = 0.3
    """Share of noisy actions in the warm start's scripted demonstrations."""
    paraphrase: float = 0.0
    """Probability that a training episode's instruction (the warm start's demonstrations and the
    rounds' collected episodes) is replaced by a paraphrase (simulators.simdroid.paraphrase); the
    held-out evaluations keep the tasks' own texts."""
    learner: dict[str, Any] = field(default_factory=dict)
    """LearnerConfig overrides applied to every method (after the method's own) whose algorithm
    reads them: a field of one algorithm's loss (e.g. ``decoupled_retrace``) leaves the methods of
    the others alone (``learner_for``)."""
    warm: dict[str, Any] = field(default_factory=dict)
    """WarmStartConfig overrides."""
    validation: bool = False
    """Evaluate on the validation split carved from the train tasks instead of the test split."""
    validation_words: bool = False
    """With ``validation``: hold out templates with words no fit template has
    (``validation_split(words=True)``), the tiny vocabulary built from the fit tasks alone."""
    validation_unseen: bool = False
    """With ``validation``: the validation_unseen selection (a held-out template *and* parameter
    per task, as test holds out both), trained beside fit_unseen, whose vocabulary the tiny model uses."""
    base: str | None = None
    """A pretrained base ("minilm", "smollm2" or a folder); None: the tiny default model."""
    encoder_layers: int = 1
    """An encoder base's top layers trained (EncoderSettings.trainable_layers; 0: the heads alone)."""
    encoder_candidates: str = "pooled"
    """How an encoder base reads a candidate (EncoderSettings.candidates): "pooled" or "spans"."""
    behaviour_lag: int = 0
    """Collectors act with the weights of this many versions ago (LoopConfig.behaviour_lag)."""

    def __post_init__(self) -> None:
        if self.env_steps < 1 or self.episodes_per_round < 1 or self.updates_per_round < 0:
            raise ValueError(
                f"env_steps={self.env_steps} and episodes_per_round={self.episodes_per_round} must be >= 1, "
                f"updates_per_round={self.updates_per_round} >= 0"
            )
        if self.behaviour_lag < 0:
            raise ValueError(f"behaviour_lag={self.behaviour_lag} must be >= 0")
        if (self.validation_words or self.validation_unseen) and not self.validation:
            raise ValueError(
                "--validation-words and --validation-unseen select a validation split: add --validation"
            )
        if self.validation_words and self.validation_unseen:
            raise ValueError("--validation-words and --validation-unseen are two selections: pick one")
        if not 0.0 <= self.paraphrase <= 1.0:
            raise ValueError(f"--paraphrase {self.paraphrase} is a probability: give 0-1")
        if self.encoder_layers < 0:
            raise ValueError(f"encoder_layers={self.encoder_layers} must be >= 0 (0: the heads alone)")
        # A bad override fails here, in the parent, not in every worker process.
        for algorithm in ALGORITHMS:
            LearnerConfig(algorithm=algorithm, **self.learner_for(algorithm))
        WarmStartConfig(**self.warm)

    @property
    def heldout_split(self) -> str:
        """The tasks evaluated on (those trained on: TRAINED_BESIDE of it)."""
        if not self.validation:
            return "test"
        return (
            "validation_unseen"
            if self.validation_unseen
            else "validation_words"
            if self.validation_words
            else "validation"
        )

    def splits(self, family: str) -> tuple[list[Task], list[Task]]:
        """(train, evaluation) tasks: train and test, or a validation selection and the fit tasks
        beside it (simulators.simdroid.tasks: validation moves each kind's ``*-train-0`` template out
        of train; validation_words the template with words no other has; validation_unseen that one
        and every fourth parameter)."""
        held = self.heldout_split
        return load_tasks(family, TRAINED_BESIDE[held]), load_tasks(family, held)

    def policy_config(self, seed: int) -> PolicyConfig:
        """The tiny default (initial weights from the seed, its vocabulary from the tasks trained on),
        an encoder base (its top ``encoder_layers`` trained) or a causal LM adapted with LoRA, whose
        learning rates and micro-batches then follow from it (distrl_core.policy.defaults)."""
        vocabulary = (
            "train" if self.heldout_split in ("test", "validation") else TRAINED_BESIDE[self.heldout_split]
        )
        encoder = self.base is not None and is_encoder_folder(resolve_base(self.base))
        return policy_config_for(
            self.base,
            seed,
            vocabulary,  # type: ignore[arg-type]
            self.encoder_layers if encoder else None,
            self.encoder_candidates if encoder else None,  # type: ignore[arg-type]
            device="cpu",
        )

    def learner_for(self, algorithm: Algorithm) -> dict[str, Any]:
        """The ``learner`` overrides ``algorithm`` reads (LearnerConfig refuses the others)."""
        readers = field_readers()
        return {k: v for k, v in self.learner.items() if algorithm in readers.get(k, (algorithm,))}

    def stale(self, behaviour_lag: int, max_policy_lag: int) -> CurveSettings:
        """These settings with collectors `behaviour_lag` versions behind and the learner keeping
        rows up to `max_policy_lag` versions old."""
        learner = {**self.learner, "max_policy_lag": max_policy_lag}
        return dataclasses.replace(self, behaviour_lag=behaviour_lag, learner=learner)


def add_curve_arguments(parser: argparse.ArgumentParser, *, env_steps: int = 8000) -> None:
    """The command-line options behind `CurveSettings`' fields (those a user sets)."""
    parser.add_argument("--env-steps", type=int, default=env_steps, help="environment-step budget per run")
    parser.add_argument("--episodes-per-round", type=int, default=32)
    parser.add_argument("--updates-per-round", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=4, help="gigpo: episodes per task per group")
    parser.add_argument(
        "--eval-tasks", type=int, default=None, help="first N held-out tasks only (smoke runs)"
    )
    parser.add_argument(
        "--eval-episodes", type=int, default=2, help="greedy episodes per held-out task per evaluation"
    )
    parser.add_argument("--warm-start-updates", type=int, default=40)
    parser.add_argument("--warm-start-noise", type=float, default=0.3)
    parser.add_argument(
        "--paraphrase",
        type=float,
        default=0.0,
        metavar="P",
        help="probability that a training episode's instruction (warm start and rounds) is a paraphrase",
    )
    parser.add_argument(
        "--validation", action="store_true", help="evaluate on a validation split of train, not on test"
    )
    parser.add_argument(
        "--validation-words",
        action="store_true",
        help="with --validation: the split that holds out words too (the tiny vocabulary from fit tasks)",
    )
    parser.add_argument(
        "--validation-unseen",
        action="store_true",
        help="with --validation: the split that holds out a template and a parameter per task, as test does",
    )
    parser.add_argument(
        "--learner", nargs="*", default=[], metavar="KEY=VALUE", help="LearnerConfig overrides"
    )
    parser.add_argument(
        "--warm", nargs="*", default=[], metavar="KEY=VALUE", help="WarmStartConfig overrides"
    )


def curve_settings(args: argparse.Namespace) -> CurveSettings:
    """`CurveSettings` from parsed arguments: every field the namespace has, overrides parsed."""
    given = vars(args)
    names = {f.name for f in dataclasses.fields(CurveSettings)} - {"learner", "warm"}
    return CurveSettings(
        **{name: given[name] for name in names if name in given},
        learner=parse_overrides(given.get("learner", [])),
        warm=parse_overrides(given.get("warm", [])),
    )
