"""The judge's prompt: instruction, last actions, and the final screen (images or compact UI text).

The shape follows the DigiRL/DistRL "autoeval": the judge first states what a completed task would look
like on screen, compares it with what the screen shows, and ends with a one-word status line that
:func:`~distrl_core.evaluators.judge_parse.parse_judge_answer` reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from distrl_core.evaluators.base import EpisodeContext

SYSTEM_PROMPT = (
    "You check whether an agent operating an Android phone has completed the task it was given. "
    "Judge only from the screen you are shown and the agent's recent actions; if the screen does not "
    "show the task's end state, the task is not complete."
)

ANSWER_FORMAT = (
    "Answer in this form:\n"
    "Expected: <what the screen would show if the task were complete>\n"
    "Observed: <what the screen actually shows>\n"
    "Status: <success or failure>"
)


@dataclass(frozen=True)
class JudgePrompt:
    """A backend-neutral prompt. ``images`` are PNG bytes, newest last; empty for text-only judging."""

    system: str
    user_text: str
    images: tuple[bytes, ...] = ()


def build_judge_prompt(
    context: EpisodeContext,
    *,
    use_images: bool,
    max_screenshots: int = 1,
    max_actions: int = 5,
    ui_text_max_chars: int = 2000,
) -> JudgePrompt:
    """Builds the prompt for one judgement.

    With ``use_images`` the last ``max_screenshots`` screenshots are attached; without it (text-only
    models), or when there are no screenshots, the compact UI text stands in for the screen.
    """
    lines = [f"Task: {context.instruction.strip()}"]
    recent_actions = list(context.actions)[-max_actions:] if max_actions > 0 else []
    if recent_actions:
        lines.append("Last actions, oldest first:")
        lines.extend(f"{n}. {action}" for n, action in enumerate(recent_actions, start=1))
    else:
        lines.append("Last actions: none recorded.")

    images = tuple(context.screenshots[-max_screenshots:]) if use_images and max_screenshots > 0 else ()
    if images:
        lines.append(
            "Screen: the attached screenshot."
            if len(images) == 1
            else f"Screen: the {len(images)} attached screenshots, newest last; judge from the newest."
        )
    elif context.ui_text:
        ui_text = context.ui_text.strip()
        if len(ui_text) > ui_text_max_chars:
            ui_text = ui_text[:ui_text_max_chars] + "\n[...]"
        lines.append("Screen (visible UI elements):")
        lines.append(ui_text)
    else:
        lines.append("Screen: not available.")
    lines.append(ANSWER_FORMAT)
    return JudgePrompt(system=SYSTEM_PROMPT, user_text="\n".join(lines), images=images)
