"""Policies for phone-control agents: a Hugging Face backbone (the tiny default built from a config,
or any causal LM, optionally with LoRA), candidate scoring or generation, critic heads, versions."""

from distrl_core.policy.candidates import Candidate, build_candidates, instruction_spans, parse_compact_tree
from distrl_core.policy.config import LoraSettings, PolicyConfig, TinyModelConfig
from distrl_core.policy.model import BaseInfo, Policy, default_tokenizer
from distrl_core.policy.types import ActOutput, EvalOutput, StepInput
from distrl_core.policy.version import BaseMismatchError, PolicyFileError, load_policy, save_policy

__all__ = [
    "ActOutput",
    "BaseInfo",
    "BaseMismatchError",
    "Candidate",
    "EvalOutput",
    "LoraSettings",
    "Policy",
    "PolicyConfig",
    "PolicyFileError",
    "StepInput",
    "TinyModelConfig",
    "build_candidates",
    "default_tokenizer",
    "instruction_spans",
    "load_policy",
    "parse_compact_tree",
    "save_policy",
]
