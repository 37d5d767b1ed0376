"""The short names of the pretrained bases built on the tiny model, and what each turns on: the
tables ``config.policy_config_for`` reads (one place to see every base's settings side by side)."""

from __future__ import annotations

__all__ = [
    "APP_MARGINS",
    "APP_SCOPED_BASES",
    "CONTEXT_SCALES",
    "CONTEXT_STATE_BASES",
    "CONTROL_PATH_BASES",
    "SEMANTIC_MATCH_BASES",
    "SEMANTIC_PRIOR_BASES",
    "SUBWORD_BASES",
    "VALUE_PATH_BASES",
    "WORD_POOLING_BASES",
]

# Short base names that build the tiny model on a packaged encoder's sub-words -> that encoder's name.
SUBWORD_BASES = dict.fromkeys(
    (
        "tiny-minilm",
        "tiny-minilm-words",
        "tiny-minilm-words-norm",
        "tiny-minilm-sem",
        "tiny-minilm-apps",
        "tiny-minilm-apps-prior",
        "tiny-minilm-apps-margin",
        "tiny-minilm-controls",
        "tiny-minilm-words-controls",
        "tiny-minilm-words-values",
        "tiny-minilm-ctx",
        "tiny-minilm-ctx-seg",
        "tiny-minilm-ctx-small",
    ),
    "minilm",
)
# The sub-word bases that read one position per word (SubwordSettings.pool_words) -> pooled_norm.
WORD_POOLING_BASES = {
    "tiny-minilm-words": False,
    "tiny-minilm-words-norm": True,
    "tiny-minilm-words-controls": False,
    "tiny-minilm-words-values": False,
}
# The sub-word bases whose semantic feature follows the routes to the device's controls
# (SubwordSettings.semantic_paths) ...
CONTROL_PATH_BASES = frozenset(
    {"tiny-minilm-controls", "tiny-minilm-words-controls", "tiny-minilm-words-values"}
)
# ... and, of those, the ones whose routes to a control taking a value read the instruction less the
# value (SubwordSettings.semantic_value_paths).
VALUE_PATH_BASES = frozenset({"tiny-minilm-words-values"})
# The sub-word bases whose feature scores SimDroid's app icons (SubwordSettings.semantic_labels): the
# route bases and the app-only ones.
APP_SCOPED_BASES = CONTROL_PATH_BASES | {
    "tiny-minilm-apps",
    "tiny-minilm-apps-prior",
    "tiny-minilm-apps-margin",
}
# The sub-word bases that read the semantic match feature at all (SubwordSettings.semantic_match).
SEMANTIC_MATCH_BASES = APP_SCOPED_BASES | {"tiny-minilm-sem"}
APP_MARGINS = {"tiny-minilm-apps-margin": 0.05}  # SubwordSettings.semantic_margin of a base, else 0
SEMANTIC_PRIOR_BASES = frozenset({"tiny-minilm-apps-prior"})  # SubwordSettings.semantic_prior
# The sub-word bases that also read the encoder's contextual states (SubwordSettings.context_states),
# and how a dropped word takes them away (SubwordSettings.context_dropout).
CONTEXT_STATE_BASES = {
    "tiny-minilm-ctx": "token",
    "tiny-minilm-ctx-seg": "segment",
    "tiny-minilm-ctx-small": "token",
}
CONTEXT_SCALES = {"tiny-minilm-ctx-small": 0.1}  # SubwordSettings.context_scale of a base, else 1
