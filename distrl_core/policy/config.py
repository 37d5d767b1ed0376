"""The policy's settings: one dataclass, validated in one place."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

from distrl_core.policy.bases import (
    APP_MARGINS,
    APP_SCOPED_BASES,
    CONTEXT_SCALES,
    CONTEXT_STATE_BASES,
    CONTROL_PATH_BASES,
    SEMANTIC_MATCH_BASES,
    SEMANTIC_PRIOR_BASES,
    SUBWORD_BASES,
    VALUE_PATH_BASES,
    WORD_POOLING_BASES,
)
from distrl_core.policy.subword_settings import SubwordSettings

__all__ = [
    "CONTEXT_STATE_BASES",
    "SEMANTIC_MATCH_BASES",
    "SUBWORD_BASES",
    "WORD_POOLING_BASES",
    "EncoderSettings",
    "LoraSettings",
    "PolicyConfig",
    "SubwordSettings",
    "TinyModelConfig",
    "policy_config_for",
]

MODES = ("scoring", "generative")
CRITICS = ("separate", "shared", "detached")
# The task sets a tiny vocabulary can be built from: train, or the fit tasks beside a validation selection.
Vocabulary = Literal["train", "fit", "fit_words", "fit_unseen"]
VOCABULARIES: tuple[str, ...] = get_args(Vocabulary)
CandidateReading = Literal["pooled", "spans"]
CANDIDATE_READINGS: tuple[str, ...] = get_args(CandidateReading)
TINY_BASE = "tiny"  # the name of the default (base=None): the tiny model on its own word vocabulary


@dataclass
class TinyModelConfig:
    """The default backbone: a small Llama-style decoder built from this config with random weights
    drawn from ``seed`` (so the same config and seed always give the same base, whose hash the
    version records). Measured on this project's 2-core CPU: a learner update on batch 16 stays
    well under 0.5 s at these sizes.

    - ``hidden_size``/``num_layers``/``num_heads``/``intermediate_size``: transformer shape.
    - ``max_positions``: longest prompt in tokens (launcher screens take ~150).
    - ``seed``: initialisation seed of the weights and the heads.
    """

    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    intermediate_size: int = 128
    max_positions: int = 512
    seed: int = 0

    def validate(self) -> None:
        for name in ("hidden_size", "num_layers", "num_heads", "intermediate_size", "max_positions"):
            if getattr(self, name) < 1:
                raise ValueError(f"TinyModelConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"TinyModelConfig.hidden_size ({self.hidden_size}) must be divisible by num_heads "
                f"({self.num_heads})"
            )


@dataclass
class LoraSettings:
    """PEFT LoRA on top of a pretrained base (``PolicyConfig.base``); the base stays frozen.

    - ``r``/``alpha``/``dropout``: LoRA rank, scaling numerator, dropout on the adapter input.
    - ``target_modules``: module names to adapt; "all-linear" lets PEFT pick every linear layer
      (of a vision-language base, those of its text decoder only: the vision tower and projector
      stay frozen, see ``backbone.language_model_linears``).
    """

    r: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: list[str] | str = "all-linear"

    def validate(self) -> None:
        if self.r < 1 or self.alpha < 1:
            raise ValueError(f"LoraSettings needs r >= 1 and alpha >= 1, got r={self.r}, alpha={self.alpha}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"LoraSettings.dropout must be in [0, 1), got {self.dropout}")


@dataclass
class EncoderSettings:
    """A pretrained bidirectional encoder (a BERT-style ``PolicyConfig.base`` such as
    all-MiniLM-L6-v2) scoring candidates: the observation is encoded once, each candidate text
    separately, and a head scores the pair (see ``policy.encoder``).

    - ``trainable_layers``: top transformer layers trained (0: the heads alone); the layers below
      and the embeddings stay frozen, and their output per text is cached.
    - ``cache_megabytes``: byte cap of that cache (least recently used texts are evicted first).
    - ``learner_cache_megabytes``: the cap in a process that trains (``Learner``). A learner samples
      its replay by priority again and again, so a step evicted since it was collected costs the
      frozen layers again (~4x an update's work when every text misses); at ~200 KB per
      observation, 2048 MB hold ~10,000 steps, the whole replay of a 6-minute demo. Collectors see
      each screen once and keep the smaller cap.
    - ``max_tokens``: longest observation text in tokens; longer ones are cut (the screen's tail).
    - ``candidates``: how a candidate is read. "pooled": its text encoded on its own and scored
      against the instruction's pooled state (a bi-encoder); "spans": from the observation's own
      top-layer states over the candidate's place in it, where its tokens attend to the
      instruction and the screen (a cross-encoder, as the tiny default is), with the tiny
      default's span head (see ``policy.encoder_spans``).
    """

    trainable_layers: int = 1
    cache_megabytes: int = 256
    learner_cache_megabytes: int = 2048
    max_tokens: int = 256
    candidates: CandidateReading = "pooled"

    def validate(self) -> None:
        if self.trainable_layers < 0 or self.cache_megabytes < 1 or self.max_tokens < 8:
            raise ValueError(
                "EncoderSettings needs trainable_layers >= 0, cache_megabytes >= 1 and max_tokens >= 8, got "
                f"{self.trainable_layers}, {self.cache_megabytes}, {self.max_tokens}"
            )
        if self.learner_cache_megabytes < self.cache_megabytes:
            raise ValueError(
                f"EncoderSettings.learner_cache_megabytes ({self.learner_cache_megabytes}) is below "
                f"cache_megabytes ({self.cache_megabytes}): a learner re-reads its replay, so give it at least "
                "the collectors' cap"
            )
        if self.candidates not in CANDIDATE_READINGS:
            raise ValueError(
                f"EncoderSettings.candidates must be one of {CANDIDATE_READINGS}, got {self.candidates!r}"
            )


@dataclass
class PolicyConfig:
    """How the policy is built and how it acts.

    - ``base``: a local directory or hub id of a Hugging Face causal LM; None builds the tiny
      default model from ``tiny`` with a word-level tokenizer trained on SimDroid text.
    - ``mode``: "scoring" (the default: score candidate actions built from the observation and
      act from the softmax over them) or "generative" (the model writes the action text).
    - ``lora``: LoRA settings for a pretrained base; None trains all weights (right for ``tiny``,
      whose weights are random).
    - ``temperature``: π is softmax(score / temperature) over candidates, or the token
      distribution's logits / temperature when generating; the learner uses the same π.
    - ``history``: previous actions shown in the prompt. The learner rebuilds them from earlier
      rows of the same episode, so history > 0 needs whole-episode samples (not windows).
    - ``screen_size``: pixel size that compact-tree bounds refer to (slider taps).
    - ``match_features``: add an exact-match embedding (does this word occur in the instruction?)
      to the input embeddings; what lets a small model ground unseen words.
    - ``critic``: what the critics (state value, trajectory success) read. "detached" (default):
      the actor backbone's hidden states without gradient, MLP heads on top (cheapest; the heads
      have their own optimiser); "separate" (as DistRL/DigiRL, whose critics are separate
      models): a second tiny encoder built from ``tiny`` (seed + 2) over the same prompt, trained
      only by the critic loss (about 1.7x the update time; it did not learn faster here);
      "shared": the actor's hidden states with the critic loss back-propagating into them.
    - ``max_new_tokens``: generation cap (an untrained model fills it: keep it small).
    - ``vision``: feed screenshots through the base's AutoProcessor (a pretrained vision-language
      model loaded with AutoModelForImageTextToText; generative mode only).
    - ``device``: "auto" (cuda when available), "cpu" or "cuda[:n]".
    - ``seed``: seed of the action sampler.
    - ``tokenizer_extra_words``: words added to the default tokenizer's vocabulary.
    - ``vocabulary``: the task texts the tiny default's word vocabulary is built from: "train"
      (the default), or "fit_words" / "fit" / "fit_unseen" (the train split less the validation
      tasks of ``validation_split(words=True)`` / ``validation_split()`` / ``unseen_split()``), so
      that choices made on that validation split see its unseen words as [UNK], as the test
      split's are. Unused with ``subwords`` (the encoder's whole WordPiece vocabulary, built from no
      task split).
    - ``subwords``: the tiny default on a pretrained encoder's sub-words and projected word-piece
      embeddings (``base`` stays None: the network is the tiny one); None: its own word vocabulary.
    - ``encoder``: settings of an encoder base (``base`` is then a BERT-style encoder, not a
      causal LM; scoring mode, no LoRA: its top layers are trained instead); None otherwise.
    """

    base: str | None = None
    mode: Literal["scoring", "generative"] = "scoring"
    tiny: TinyModelConfig = field(default_factory=TinyModelConfig)
    lora: LoraSettings | None = None
    temperature: float = 1.0
    history: int = 0
    screen_size: tuple[int, int] = (1080, 2400)
    match_features: bool = True
    critic: Literal["separate", "shared", "detached"] = "detached"
    max_new_tokens: int = 24
    vision: bool = False
    device: str = "auto"
    seed: int = 0
    tokenizer_extra_words: list[str] = field(default_factory=list)
    vocabulary: Vocabulary = "train"
    encoder: EncoderSettings | None = None
    subwords: SubwordSettings | None = None

    def __post_init__(self) -> None:
        if isinstance(self.tiny, dict):
            self.tiny = TinyModelConfig(**self.tiny)
        if isinstance(self.lora, dict):
            self.lora = LoraSettings(**self.lora)
        if isinstance(self.encoder, dict):
            self.encoder = EncoderSettings(**self.encoder)
        if isinstance(self.subwords, dict):
            self.subwords = SubwordSettings(**self.subwords)
        self.screen_size = tuple(self.screen_size)  # type: ignore[assignment]
        self.validate()

    def validate(self) -> None:
        if self.critic not in CRITICS:
            raise ValueError(f"PolicyConfig.critic must be one of {CRITICS}, got {self.critic!r}")
        if self.mode not in MODES:
            raise ValueError(f"PolicyConfig.mode must be one of {MODES}, got {self.mode!r}")
        if not self.temperature > 0:
            raise ValueError(
                f"PolicyConfig.temperature must be > 0 (use act(greedy=True) for argmax), got {self.temperature}"
            )
        if self.history < 0 or self.max_new_tokens < 1:
            raise ValueError("PolicyConfig.history must be >= 0 and max_new_tokens >= 1")
        if len(self.screen_size) != 2 or min(self.screen_size) < 1:
            raise ValueError(f"PolicyConfig.screen_size must be (width, height) > 0, got {self.screen_size}")
        if self.vision and self.base is None:
            raise ValueError(
                "PolicyConfig.vision needs a pretrained vision-language base (base=<dir or hub id>); "
                "the tiny default model reads the compact UI text only"
            )
        if self.vision and self.mode != "generative":
            raise ValueError(
                "PolicyConfig.vision works with mode='generative' (the VLM writes the action); candidate "
                "scoring reads the compact UI text only"
            )
        if self.lora is not None and self.base is None:
            raise ValueError(
                "PolicyConfig.lora adapts a pretrained base; the tiny default model has random weights "
                "and is trained in full: set lora=None or give base=<dir or hub id>"
            )
        self._validate_parts()

    def _validate_parts(self) -> None:
        if self.vocabulary not in VOCABULARIES:
            raise ValueError(
                f"PolicyConfig.vocabulary must be one of {VOCABULARIES}, got {self.vocabulary!r}"
            )
        if self.encoder is not None:
            self._validate_encoder(self.encoder)
        if self.subwords is not None:
            self._validate_subwords(self.subwords)
        self.tiny.validate()
        if self.lora is not None:
            self.lora.validate()

    def _validate_encoder(self, encoder: EncoderSettings) -> None:
        if self.base is None or self.mode != "scoring" or self.lora is not None or self.vision:
            raise ValueError(
                "PolicyConfig.encoder needs base=<an encoder folder> with mode='scoring', lora=None and "
                "vision=False (an encoder scores candidates; its top layers are trained, not a LoRA adapter)"
            )
        if self.critic == "separate":
            raise ValueError(
                "PolicyConfig.encoder works with critic='detached' or 'shared' (the critics read the "
                "encoded observation); 'separate' builds a tiny decoder of its own"
            )
        encoder.validate()

    def _validate_subwords(self, subwords: SubwordSettings) -> None:
        if self.base is not None:
            raise ValueError(
                "PolicyConfig.subwords gives the tiny default a pretrained encoder's sub-words; a pretrained "
                f"base ({self.base}) brings its own tokenizer: set base=None, or subwords=None"
            )
        if self.tokenizer_extra_words:
            raise ValueError(
                "PolicyConfig.tokenizer_extra_words adds words to the tiny word vocabulary; with subwords the "
                "vocabulary is the encoder's WordPiece one (which splits any word): leave it empty"
            )
        subwords.validate()
        if subwords.pool_words and self.critic == "separate":
            raise ValueError(
                "SubwordSettings.pool_words works with critic='detached' or 'shared' (the critics read the "
                "actor's word positions); 'separate' reads word pieces: pick another critic or pool_words=False"
            )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["screen_size"] = list(self.screen_size)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PolicyConfig:
        return cls(**data)


def policy_config_for(
    base: str | None,
    seed: int = 0,
    vocabulary: Vocabulary = "train",
    encoder_layers: int | None = None,
    encoder_candidates: CandidateReading | None = None,
    device: str = "auto",
) -> PolicyConfig:
    """The policy a run starts from: the tiny default (None or "tiny"; initial weights from ``seed``, its word
    vocabulary from the ``vocabulary`` tasks: "train", or a validation selection's fit tasks when
    choices are made there), an encoder base (its top layer and the heads trained; "minilm" names
    the packaged all-MiniLM-L6-v2), the tiny model on that encoder's sub-words and projected word-piece
    embeddings ("tiny-minilm": ``SubwordSettings``; "tiny-minilm-words": one position per word;
    "tiny-minilm-sem": the same with its semantic match feature; "tiny-minilm-apps": that feature
    on SimDroid's app icons alone, with "-prior" and "-margin" variants; "tiny-minilm-controls": the
    app icons and the labels on the routes to SimDroid's controls, "tiny-minilm-words-controls" the
    same one position per word, "tiny-minilm-words-values" that with the routes to a control taking
    a value read without the value; "tiny-minilm-ctx": the same
    reading the encoder's contextual token states), a causal LM
    adapted with LoRA ("smollm2" names the packaged SmolLM2), or a vision-language model (a folder whose config has a ``vision_config``:
    generative, reading the screenshot, LoRA on its text decoder); ``seed`` also seeds the sampler.
    A pretrained base brings its own tokenizer.
    ``encoder_layers``: an encoder base's top layers trained (None: EncoderSettings' default);
    ``encoder_candidates``: how it reads a candidate, "pooled" or "spans" (None: its default)."""
    encoder_options = encoder_layers is not None or encoder_candidates is not None
    if base is not None and base.lower() == TINY_BASE:
        base = None
    if base is None:
        if encoder_options:
            raise ValueError(
                "encoder_layers and encoder_candidates apply to an encoder base (e.g. base='minilm'), not "
                "the tiny model"
            )
        return PolicyConfig(device=device, seed=seed, tiny=TinyModelConfig(seed=seed), vocabulary=vocabulary)
    from distrl_core.policy.pretrained import is_encoder_folder, is_vision_folder, resolve_base
    from distrl_core.policy.vocabulary import app_labels, control_paths, value_paths

    if base.lower() in SUBWORD_BASES:
        if encoder_options:
            raise ValueError(
                f"encoder_layers and encoder_candidates apply to an encoder base; {base!r} is the tiny model "
                "on an encoder's sub-words (no encoder layer runs): leave them out"
            )
        source = resolve_base(SUBWORD_BASES[base.lower()])
        tiny = TinyModelConfig(seed=seed)
        semantic = base.lower() in SEMANTIC_MATCH_BASES
        context = CONTEXT_STATE_BASES.get(base.lower())
        flags = {"semantic_match": semantic, "context_states": context is not None}
        scale = CONTEXT_SCALES.get(base.lower(), 1.0)
        flags["pool_words"] = base.lower() in WORD_POOLING_BASES
        flags["pooled_norm"] = WORD_POOLING_BASES.get(base.lower(), False)
        flags["semantic_prior"] = base.lower() in SEMANTIC_PRIOR_BASES
        margin = APP_MARGINS.get(base.lower(), 0.0)
        labels = app_labels() if base.lower() in APP_SCOPED_BASES else ()
        paths = control_paths() if base.lower() in CONTROL_PATH_BASES else ()
        values = value_paths() if base.lower() in VALUE_PATH_BASES else ()
        subwords = SubwordSettings(
            source,
            context_dropout=context or "token",
            context_scale=scale,
            semantic_labels=labels,
            semantic_margin=margin,
            semantic_paths=paths,
            semantic_value_paths=values,
            **flags,
        )
        return PolicyConfig(device=device, seed=seed, tiny=tiny, vocabulary=vocabulary, subwords=subwords)
    base = resolve_base(base)
    if is_encoder_folder(base):
        chosen: dict[str, Any] = {} if encoder_layers is None else {"trainable_layers": encoder_layers}
        chosen |= {} if encoder_candidates is None else {"candidates": encoder_candidates}
        return PolicyConfig(base=base, encoder=EncoderSettings(**chosen), device=device, seed=seed)
    if encoder_options:
        raise ValueError(
            f"encoder_layers and encoder_candidates apply to an encoder base; {base} is a causal LM "
            "adapted with LoRA: leave them out"
        )
    if is_vision_folder(base):  # reads the screenshot and writes the action; LoRA on its text decoder
        return PolicyConfig(
            base=base, mode="generative", vision=True, lora=LoraSettings(), device=device, seed=seed
        )
    return PolicyConfig(base=base, lora=LoraSettings(), device=device, seed=seed)
