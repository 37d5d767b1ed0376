"""One acted step per observation as the replay's rows, for the vision tests' act-then-rescore checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def acted_rows(observations: Sequence[Any], outputs: Sequence[Any]) -> list[dict]:
    """Rows of one-step episodes: each observation with the action the policy took on it."""
    return [
        {
            "episode_id": f"e{i}", "step": 0, "instruction": o.instruction, "observation_text": o.ui_text,
            "screenshot_png": o.screenshot_png, "raw_output": a.raw_text, "action": a.raw_text,
            "action_valid": a.action.is_valid, "reward": 0.0, "done": True, "episode_success": False,
            "behaviour_logprob": a.logprob, "action_token_count": a.token_count, "policy_version": 0,
        }
        for i, (o, a) in enumerate(zip(observations, outputs, strict=True))
    ]  # fmt: skip
