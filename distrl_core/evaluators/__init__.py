"""Evaluators: did the agent complete its task?

The model judge (``judge``) asks a (vision-)language model over HTTP (``judge_http``) or locally
(``judge_local``). The rule-based checks that read a device's state live with the devices
(``simulators.sim_rules`` for SimDroid, ``simulators.adb_checks`` over ADB). All answer an
:class:`EpisodeContext` with an :class:`EvalResult`.

Only the light modules are imported here; import backends from their modules.
"""

from distrl_core.evaluators.base import EpisodeContext, EvalResult, Evaluator, Verdict
from distrl_core.evaluators.judge import (
    JudgeBackend,
    JudgeBadResponse,
    JudgeConfig,
    JudgeError,
    JudgeRequestRejected,
    JudgeUnavailable,
    ModelJudge,
)
from distrl_core.evaluators.judge_parse import parse_judge_answer

__all__ = [
    "EpisodeContext",
    "EvalResult",
    "Evaluator",
    "JudgeBackend",
    "JudgeBadResponse",
    "JudgeConfig",
    "JudgeError",
    "JudgeRequestRejected",
    "JudgeUnavailable",
    "ModelJudge",
    "Verdict",
    "parse_judge_answer",
]
