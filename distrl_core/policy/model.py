"""The policy: a Hugging Face backbone (tiny default or pretrained, optionally with LoRA), heads,
a tokenizer, and two ways to act (candidate scoring, the default, or generation)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn

from distrl_core.envs.observation import Observation
from distrl_core.policy import encoder_scoring, generative, scoring
from distrl_core.policy.backbone import (
    apply_lora,
    build_tiny_encoder,
    hash_checkpoint_files,
    hash_state_dict,
    hf,
    load_pretrained,
    resolve_checkpoint_dir,
)
from distrl_core.policy.config import PolicyConfig, SubwordSettings
from distrl_core.policy.context_states import encoder_width, prompt_states
from distrl_core.policy.encoder import EncoderBackbone
from distrl_core.policy.heads import PolicyHeads
from distrl_core.policy.parts import ActingParts
from distrl_core.policy.prompt import PROMPT_WORDS, EncodedStep, encode_scoring_step, last_actions
from distrl_core.policy.semantic_match import step_semantic
from distrl_core.policy.subwords import build_tiny_base, load_subword_tokenizer, tiny_base_salt
from distrl_core.policy.tokenizer import build_word_tokenizer
from distrl_core.policy.types import ActOutput, EvalOutput, StepInput
from distrl_core.policy.vocabulary import vocabulary_words

__all__ = ["BaseInfo", "Policy", "StepLayout", "build_heads", "default_tokenizer"]


@dataclass(frozen=True)
class BaseInfo:
    """Where the base weights come from. ``kind`` "tiny": ``pointer`` is the TinyModelConfig as a
    dict; "pretrained": a directory or hub id. ``hash``: see backbone.py."""

    kind: str
    pointer: Any
    hash: str


class StepLayout(Protocol):
    """How flat steps sit in a padded (B, T) batch (implemented by learner.batch.StepBatch)."""

    # Read-only members, so a batch holding a list (or any sequence) of steps fits.
    @property
    def steps(self) -> Sequence[StepInput]: ...

    @property
    def shape(self) -> tuple[int, int]: ...

    @property
    def flat_index(self) -> torch.Tensor: ...  # (N,) position of each step in the flattened (B*T) batch

    @property
    def row_first(self) -> torch.Tensor: ...  # (B,) index into ``steps`` of each row's first step


@functools.cache
def default_tokenizer_corpus(split: str = "train") -> tuple[str, ...]:
    return vocabulary_words(split)


def default_tokenizer(extra_words: Sequence[str] = (), vocabulary: str = "train") -> Any:
    """The word-level tokenizer of the tiny default policy, built from SimDroid's train split (or
    the fit tasks of a validation split: ``PolicyConfig.vocabulary``)."""
    corpus = default_tokenizer_corpus(vocabulary)
    return build_word_tokenizer(corpus, extra_words=[*PROMPT_WORDS, *extra_words])


def _tiny_tokenizer(config: PolicyConfig, given: Any) -> Any:
    """The tiny model's tokenizer: ``given``, or its word vocabulary, or the encoder's WordPiece one
    (``config.subwords``, whose embedding rows are laid out by that tokenizer's ids)."""
    if config.subwords is None:
        return given or default_tokenizer(config.tokenizer_extra_words, config.vocabulary)
    if given is not None:
        raise ValueError(
            "PolicyConfig.subwords brings the encoder's own tokenizer (its embedding rows follow its ids): "
            "create the policy without a tokenizer"
        )
    return load_subword_tokenizer(config.subwords)


def build_heads(config: PolicyConfig, model: nn.Module, tokenizer: Any) -> PolicyHeads:
    """Fresh heads (and the separate critic's encoder), initialised from ``config.tiny.seed``."""
    critic_encoder = None
    if config.critic == "separate":
        critic_encoder = build_tiny_encoder(config.tiny, tokenizer, seed=config.tiny.seed + 2)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.tiny.seed + 1)
        return PolicyHeads(
            hf(model).get_input_embeddings().embedding_dim,
            match_features=config.match_features and config.mode == "scoring",
            critic_encoder=critic_encoder,
            semantic_match=_reads_semantic_match(config),
            context_width=_context_width(config),
            semantic_prior=_reads_semantic_match(config)
            and config.subwords is not None
            and config.subwords.semantic_prior,
        )


def _scoring_subwords(config: PolicyConfig) -> SubwordSettings | None:
    """The sub-word settings of a scoring tiny model on sub-words, whose opt-in inputs
    (``policy.semantic_match``, ``policy.context_states``) the policy then reads; else None."""
    scoring = config.mode == "scoring" and config.encoder is None
    return config.subwords if scoring else None


def _reads_semantic_match(config: PolicyConfig) -> bool:
    subwords = _scoring_subwords(config)
    return subwords is not None and subwords.semantic_match


def _reads_context(config: PolicyConfig) -> bool:
    subwords = _scoring_subwords(config)
    return subwords is not None and subwords.context_states


def _context_width(config: PolicyConfig) -> int | None:
    """The encoder's state width when the policy reads its contextual states, else None."""
    if not _reads_context(config) or config.subwords is None:
        return None
    return encoder_width(config.subwords.source)


def _pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


class Policy:
    def __init__(
        self,
        config: PolicyConfig,
        model: nn.Module,
        tokenizer: Any,
        heads: PolicyHeads,
        base: BaseInfo,
        processor: Any = None,
    ) -> None:
        self.config = config
        self.processor = processor  # vision-language bases: their AutoProcessor (tokenizer inside)
        self.model = model
        self.tokenizer = tokenizer
        self.heads = heads
        self.base = base
        self.device = _pick_device(config.device)
        self.model.to(self.device)
        self.heads.to(self.device)
        self.generator = torch.Generator().manual_seed(config.seed)
        # (entity, other, phrasing) probabilities; see with_word_dropout
        self.word_dropout: tuple[float, float, float] = (0.0, 0.0, 0.0)
        self._max_tokens = getattr(self._hf_config(), "max_position_embeddings", None)
        self.dropout_token_id = scoring.dropout_token_id(tokenizer)  # what word dropout feeds
        self._encode = functools.lru_cache(maxsize=1 << 16)(self._encode_uncached)

    # ----- construction ---------------------------------------------------------------------------
    @classmethod
    def create(cls, config: PolicyConfig | None = None, *, tokenizer: Any = None) -> Policy:
        """A fresh policy: the tiny default (random weights from ``config.tiny.seed``) or a
        pretrained base (with LoRA when ``config.lora`` is set)."""
        config = config or PolicyConfig()
        model: nn.Module
        if config.encoder is not None:
            from distrl_core.policy.encoder import load_encoder

            assert config.base is not None  # PolicyConfig.validate
            model, tokenizer = load_encoder(resolve_checkpoint_dir(config.base), config.encoder)
            base = BaseInfo(
                "pretrained", config.base, hash_checkpoint_files(resolve_checkpoint_dir(config.base))
            )
        elif config.base is None:
            tokenizer = _tiny_tokenizer(config, tokenizer)
            model = build_tiny_base(config, tokenizer)
            salt = tiny_base_salt(config, tokenizer)
            base = BaseInfo("tiny", config.tiny.__dict__.copy(), hash_state_dict(model, salt))
        else:
            model, loaded = load_pretrained(config)
            processor = loaded if config.vision else None
            tokenizer = tokenizer or (processor.tokenizer if processor is not None else loaded)
            base = BaseInfo(
                "pretrained", config.base, hash_checkpoint_files(resolve_checkpoint_dir(config.base))
            )
            if config.lora is not None:
                model = apply_lora(model, config.lora)
            return cls(config, model, tokenizer, build_heads(config, model, tokenizer), base, processor)
        return cls(config, model, tokenizer, build_heads(config, model, tokenizer), base)

    def _hf_config(self) -> Any:
        return getattr(self.model, "config", None)

    # ----- parameters -----------------------------------------------------------------------------
    def prepare_for_learning(self) -> None:
        """Called by a ``Learner`` on its policy: an encoder base's frozen-state cache grows to its
        learner cap (the tiny model and a LoRA base have nothing to prepare)."""
        if isinstance(self.model, EncoderBackbone):
            self.model.reserve_for_learning()

    def actor_parameters(self) -> list[nn.Parameter]:
        backbone = [p for p in self.model.parameters() if p.requires_grad]
        return backbone + self.heads.actor_parameters()

    def actor_parameter_groups(self, lr: float, backbone_lr: float | None = None) -> list[dict[str, Any]]:
        """AdamW groups of the actor: with ``backbone_lr`` the trainable backbone weights (a LoRA
        adapter) get it and the heads get ``lr``; without, one group at ``lr`` (the tiny default)."""
        if backbone_lr is None:
            return [{"params": self.actor_parameters(), "lr": lr}]
        backbone = [p for p in self.model.parameters() if p.requires_grad]
        groups = [{"params": backbone, "lr": backbone_lr, "name": "backbone"}]
        return [*groups, {"params": self.heads.actor_parameters(), "lr": lr, "name": "heads"}]

    def critic_parameters(self) -> list[nn.Parameter]:
        return self.heads.critic_parameters()

    def train(self, mode: bool = True) -> Policy:
        self.model.train(mode)
        self.heads.train(mode)
        return self

    def eval(self) -> Policy:
        return self.train(False)

    @contextlib.contextmanager
    def with_word_dropout(
        self, entity: float, other: float = 0.0, phrasing: float | None = None
    ) -> Iterator[Policy]:
        """Within the block, training passes of a scoring policy replace words shared by the
        instruction and the screen with [UNK] (or a mask token, or nothing: see
        ``scoring.dropout_token_id``) with probability ``entity``, the instruction's other words
        (its phrasing) with ``phrasing`` (None: as ``other``), and every other word with
        ``other``: a regulariser for supervised training. Never used when acting."""
        phrasing = other if phrasing is None else phrasing
        if not all(0.0 <= p <= 1.0 for p in (entity, other, phrasing)):
            raise ValueError(
                f"word dropout probabilities must be in [0, 1], got {entity}, {other}, {phrasing}"
            )
        previous, self.word_dropout = self.word_dropout, (entity, other, phrasing)
        try:
            yield self
        finally:
            self.word_dropout = previous

    def state_dict(self) -> dict[str, dict[str, torch.Tensor]]:
        """Trainable state (backbone or adapter, and heads), e.g. to copy into a collector's policy."""
        return {"model": self.model.state_dict(), "heads": self.heads.state_dict()}

    def load_state_dict(self, state: dict[str, dict[str, torch.Tensor]]) -> None:
        self.model.load_state_dict(state["model"])
        self.heads.load_state_dict(state["heads"])

    # ----- acting and evaluating ------------------------------------------------------------------
    def parts(self) -> ActingParts:
        """What the acting modes read (networks, tokenizer, settings), as of now."""
        return ActingParts(
            config=self.config,
            model=self.model,
            heads=self.heads,
            tokenizer=self.tokenizer,
            device=self.device,
            encode=self.encode,
            processor=self.processor,
            word_dropout=self.word_dropout,
            dropout_token_id=self.dropout_token_id,
            context=self._context_states if self.heads.context is not None else None,
        )

    def _context_states(self, step: EncodedStep) -> torch.Tensor:
        """(L, E) contextual states of an encoded prompt, from the process's cache (the trunk runs
        only on segments it has not read yet). A function of the prompt's text alone, so the
        learner re-scoring a stored step reads what the collector read."""
        assert self.config.subwords is not None  # _reads_context
        return prompt_states(self.config.subwords.source, step.input_ids, step.segments)

    @functools.cached_property
    def generation_stops(self) -> frozenset[int]:
        """The tokens that end a generated action (computed on first use: a vocabulary scan)."""
        return generative.stop_ids(self.tokenizer)

    def _encode_uncached(self, instruction: str, ui_text: str, history: tuple[str, ...]) -> EncodedStep:
        step = encode_scoring_step(
            self.tokenizer,
            instruction,
            ui_text,
            history,
            screen_size=self.config.screen_size,
            max_tokens=self._max_tokens,
            pool_words=self.config.subwords is not None and self.config.subwords.pool_words,
        )
        if self.heads.semantic is None:
            return step
        # From the prompt's own elements: a function of (instruction, ui_text, history) alone, which
        # a stored step holds, so the learner re-scoring it reads what the collector read.
        assert self.config.subwords is not None  # _reads_semantic_match
        subwords = self.config.subwords
        semantic = step_semantic(
            subwords.source,
            instruction,
            step.elements,
            len(step.input_ids),
            subwords.semantic_scope(),
            subwords.semantic_margin,
            subwords.semantic_values(),
        )
        return dataclasses.replace(step, semantic=semantic)

    def encode(self, instruction: str, ui_text: str, history: Sequence[str] = ()) -> EncodedStep:
        return self._encode(instruction, ui_text, last_actions(history, self.config.history))

    def act(self, observations: Sequence[Observation], *, greedy: bool = False) -> list[ActOutput]:
        """One action per observation (batched), sampled from π (argmax when ``greedy``)."""
        if not observations:
            return []
        # Toggle only when needed: switching modes walks every submodule, a sixth of acting's CPU.
        was_training = self.model.training or self.heads.training
        if was_training:
            self.eval()
        try:
            if self.config.encoder is not None:
                return encoder_scoring.act_encoder(
                    self.parts(), observations, greedy=greedy, generator=self.generator
                )
            if self.config.mode == "scoring":
                return scoring.act_scoring(
                    self.parts(), observations, greedy=greedy, generator=self.generator
                )
            return generative.act_generative(
                self.parts(),
                observations,
                greedy=greedy,
                generator=self.generator,
                stops=self.generation_stops,
            )
        finally:
            if was_training:
                self.train(True)

    def evaluate_steps(self, steps: Sequence[StepInput]) -> dict[str, torch.Tensor]:
        """Flat (N,) log π, entropy, values, trajectory logits and ``known`` for stored steps."""
        if self.config.encoder is not None:
            return encoder_scoring.evaluate_encoder(self.parts(), steps)
        if self.config.mode == "scoring":
            return scoring.evaluate_scoring(self.parts(), steps)
        return generative.evaluate_generative(self.parts(), steps)

    def evaluate(self, batch: StepLayout) -> EvalOutput:
        """The learner's pass over a padded batch: log π (B, T), entropy (B, T), values (B, T),
        trajectory logits (B,), all with gradients, 0 (False for ``known``) at padding."""
        flat = self.evaluate_steps(batch.steps)
        rows, cols = batch.shape
        index = batch.flat_index.to(self.device)

        def scatter(values: torch.Tensor) -> torch.Tensor:
            out = values.new_zeros(rows * cols)
            return out.index_put((index,), values).view(rows, cols)

        return EvalOutput(
            logp=scatter(flat["logp"]),
            entropy=scatter(flat["entropy"]),
            values=scatter(flat["values"]),
            traj_logits=flat["traj_logits"][batch.row_first.to(self.device)],
            known=scatter(flat["known"]),
        )
