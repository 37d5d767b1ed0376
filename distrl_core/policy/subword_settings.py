"""The settings of the tiny model on a pretrained encoder's sub-words (``PolicyConfig.subwords``),
apart from ``policy.config`` so that each module stays readable; ``policy.config`` re-exports it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CONTEXT_DROPOUTS", "PATH_SEPARATOR", "SubwordSettings"]

CONTEXT_DROPOUTS = ("token", "segment")
PATH_SEPARATOR = " > "  # between the labels of a ``SubwordSettings.semantic_paths`` entry


@dataclass
class SubwordSettings:
    """The tiny default reading a pretrained encoder's WordPiece sub-words (see ``policy.subwords``):
    its tokenizer is the encoder's, and its embedding table is the encoder's word-piece embeddings
    projected onto their top ``TinyModelConfig.hidden_size`` principal axes, so an unseen word is
    split into known sub-words with a pretrained meaning instead of becoming [UNK]. Nothing else of
    the encoder is used: an update costs what the tiny model's does.

    - ``source``: the encoder's folder (a Hugging Face BERT-style folder with a WordPiece tokenizer
      and ``embeddings.word_embeddings.weight``; ``policy_config_for("tiny-minilm")`` fills in the
      packaged all-MiniLM-L6-v2's).
    - ``std``: the projected table is scaled to this standard deviation over all its entries: the
      tiny model's own initialiser (Llama's ``initializer_range``), so its layers and the match
      features start from inputs of the scale they were tuned with. One factor for the whole table
      keeps the pretrained geometry (distances, nearest sub-words) up to scale.
    - ``train_embeddings``: whether the table is trained. False (the default): Adam moves every
      trained entry by about the learning rate per step whatever its gradient (~0.3 in 300 warm-start
      updates at 1e-3, against entries of ~0.02), so the sub-words of the training tasks would leave
      the pretrained space while the sub-words never trained on stay in it, and an unseen word would
      no longer sit near its seen synonyms. Frozen, it also adds nothing to an update.
    - ``semantic_match``: also feed the frozen encoder's judgement of which screen element the
      instruction means (``policy.semantic_match``): each element's cosine similarity to the
      instruction under the whole encoder (mean-pooled sentence embeddings, computed once per
      distinct text and cached), as a learned embedding per similarity bin added to its tokens'
      inputs, beside the exact-match flags. Grounds paraphrases that share no word with the label
      ("check my email" for Gmail). False (the default): the policy is bit for bit what it was
      without it; base "tiny-minilm-sem" turns it on.
    - ``semantic_labels``: with ``semantic_match``, score only the elements labelled as one of these
      texts (case aside), and mark as "most similar" the one whose label is the most similar of all
      of them, on the screen or not: the device's app names, as its launcher shows them. Scored on
      every screen, the similarity taught the policy to tap whatever is most like the instruction
      (the existing "15:00 alarm" instead of "Add alarm"); limited to the apps it says which app an
      instruction needs, and nothing else. Empty (the default): every element is scored. Base
      "tiny-minilm-apps" sets SimDroid's app names (``vocabulary.app_labels``); for a real device,
      its launcher's labels.
    - ``semantic_prior``: with ``semantic_match``, also add one learned score per similarity index
      (zero at first) straight to the score of the element's tap, a path from the feature to the
      action that needs no reading of it by the layers.
    - ``semantic_margin``: with ``semantic_labels``, the most similar label is marked only when its
      similarity leads the second's by at least this much (0: always). A switch instruction ("turn
      nfc off") is about as like "Phone" as "Settings" (the wrong app leads by 0.001-0.04 for 6 of
      the 7 development switch phrasings it wins), while an app named by other words leads by 0.05
      or more for 52 of 54 development phrasings; base "tiny-minilm-apps-margin" sets 0.05.
    - ``semantic_paths``: with ``semantic_labels``, also the device's controls, each as the labels
      tapped from the launcher to it joined by " > " ("Settings > Network & internet > Wi-Fi"): the
      instruction is compared with each control's own label, an app is as similar as its most
      similar control, and the best path marks the deepest of its labels a screen shows, so the
      feature says where to go at every step of a switch instruction, not only which app. Empty
      (the default): apps alone, as before. Base "tiny-minilm-controls" sets SimDroid's
      (``vocabulary.control_paths``); for a real device, its Settings index.
    - ``semantic_value_paths``: with ``semantic_labels``, routes (as ``semantic_paths``) that end at
      a control taking a value: a text field typed into, a slider tapped at a point. They join the
      scope (once, if also in ``semantic_paths``), and their last label is compared with the
      instruction less the values it names (its query, quoted text, web address:
      ``semantic_match.instruction_without_values``), because what is typed says nothing about where:
      "google best ramen in tokyo" is as like Translate as like Chrome's address bar, "google" alone
      is like the bar. Empty (the default): every route is compared with the whole instruction.
      Base "tiny-minilm-words-values" sets SimDroid's (``vocabulary.value_paths``: Chrome's address
      bar, the brightness slider).
    - ``context_states``: also add a trained map (zero at first) of the frozen encoder's
      contextual token states to the inputs (``policy.context_states``: its trunk reads each prompt
      segment alone, cached per text), so a word arrives as read in its phrase. False (the default):
      bit for bit as before; bases "tiny-minilm-ctx" and "tiny-minilm-ctx-seg" turn it on.
    - ``context_dropout``: what a word dropped in training takes with it: "token" its own state;
      "segment" its whole segment's states, whose other tokens' states name it too.
    - ``context_scale``: the projected states are multiplied by this before they are added. Adam
      moves every weight by about its learning rate per step whatever the gradient's size, so at
      1 the states outgrew the static embedding tenfold in a 300-update warm start and swamped
      the match flags; 0.1 (base "tiny-minilm-ctx-small") keeps them at its scale.
    - ``pool_words``: the model reads one position per word (the mean of its word pieces' inputs)
      instead of one per piece: SimDroid's prompts split into ~25 % more pieces than words, and
      attention's cost grows with the square of the positions. An unseen word keeps its pieces'
      pretrained meaning (their mean). False (the default): one position per piece, bit for bit as
      before; base "tiny-minilm-words" turns it on, "tiny-minilm-words-controls" with the semantic
      feature along the routes (every piece of an element's word carries the element's index, so
      the pooled word carries it too; the prior reads a word's first piece's).
    - ``pooled_norm``: a pooled word's mean times the square root of its piece count, so a word of
      k pieces (whose mean shrinks about as 1/sqrt(k): the pieces point different ways) keeps one
      piece's scale beside the match flags (and beside it the semantic index's embedding, which
      then scales alike); base "tiny-minilm-words-norm".
    """

    source: str
    std: float = 0.02
    train_embeddings: bool = False
    semantic_match: bool = False
    context_states: bool = False
    context_dropout: str = "token"
    context_scale: float = 1.0
    pool_words: bool = False
    pooled_norm: bool = False
    semantic_labels: tuple[str, ...] = ()
    semantic_prior: bool = False
    semantic_margin: float = 0.0
    semantic_paths: tuple[str, ...] = ()
    semantic_value_paths: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.semantic_labels = tuple(self.semantic_labels)  # a saved config's JSON holds a list
        self.semantic_paths = tuple(self.semantic_paths)
        self.semantic_value_paths = tuple(self.semantic_value_paths)

    def _routes(self) -> tuple[str, ...]:
        return self.semantic_paths + tuple(
            p for p in self.semantic_value_paths if p not in self.semantic_paths
        )

    def semantic_scope(self) -> tuple[tuple[str, ...], ...]:
        """The feature's paths: each app name alone, then each control's labels from its app on."""
        controls = tuple(tuple(path.split(PATH_SEPARATOR)) for path in self._routes())
        return tuple((label,) for label in self.semantic_labels) + controls

    def semantic_values(self) -> tuple[bool, ...]:
        """One flag per path of :meth:`semantic_scope`: a route to a control that takes a value;
        empty when no route does (the feature then compares every path with the whole instruction)."""
        if not self.semantic_value_paths:
            return ()
        values = set(self.semantic_value_paths)
        return (False,) * len(self.semantic_labels) + tuple(path in values for path in self._routes())

    def _check_paths(self) -> None:
        if self.semantic_value_paths and not self.semantic_labels:
            raise ValueError(
                "SubwordSettings.semantic_value_paths are routes of the scoped feature: set semantic_labels too"
            )
        for path in self._routes():
            labels = path.split(PATH_SEPARATOR)
            if (
                len(labels) < 2
                or not all(label.strip() for label in labels)
                or labels[0] not in self.semantic_labels
            ):
                field = "semantic_paths" if path in self.semantic_paths else "semantic_value_paths"
                raise ValueError(
                    f"SubwordSettings.{field} entry {path!r}: want an app of semantic_labels and the "
                    f"labels tapped from it to a control, joined by {PATH_SEPARATOR!r} (e.g. 'Settings > "
                    "Display > Dark theme')"
                )

    def validate(self) -> None:
        if self.semantic_margin and not self.semantic_labels:
            raise ValueError(
                "SubwordSettings.semantic_margin applies to the scoped feature: set semantic_labels too"
            )
        self._check_paths()
        if not 0 <= self.semantic_margin < 1:
            raise ValueError(f"SubwordSettings.semantic_margin must be in [0, 1), got {self.semantic_margin}")
        if (self.semantic_labels or self.semantic_prior) and not self.semantic_match:
            raise ValueError(
                "SubwordSettings.semantic_labels and semantic_prior shape the semantic match feature: set "
                "semantic_match=True too, or leave them out"
            )
        if self.pooled_norm and not self.pool_words:
            raise ValueError("SubwordSettings.pooled_norm scales pooled words: set pool_words=True too")
        if self.pool_words and self.context_states:
            raise ValueError(
                "SubwordSettings.pool_words reads one position per word; the contextual states are placed per "
                "word piece: turn pool_words or context_states off"
            )
        if not self.source:
            raise ValueError(
                "SubwordSettings.source must name an encoder folder (e.g. the one `distrl pretrained` "
                "prepares, .distrl/models/all-minilm-l6-v2); policy_config_for('tiny-minilm') fills it in"
            )
        if self.context_dropout not in CONTEXT_DROPOUTS:
            raise ValueError(f"SubwordSettings.context_dropout must be one of {CONTEXT_DROPOUTS}")
        if not self.context_scale > 0:
            raise ValueError(
                f"SubwordSettings.context_scale must be > 0 (e.g. 1 or 0.1), got {self.context_scale}"
            )
        if not self.std > 0:
            raise ValueError(
                f"SubwordSettings.std must be > 0 (e.g. 0.02, the tiny initialiser's), got {self.std}"
            )
