"""The storyboard of one episode that `distrl run` played: each screen, the action taken on it with
its probability, and the verdict, as PNG files and one self-contained HTML page (the screenshots
embedded, so the page can be mailed or attached to a ticket alone)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from distrl_core.evaluators.judge_http import png_data_url

__all__ = ["Frame", "write_storyboard"]


@dataclass(frozen=True)
class Frame:
    """One screen of the episode. ``step``: the action's number (1 = the first); the last frame is
    the screen the episode ended on (``action`` empty). ``note``: what happened (an invalid action,
    the verdict)."""

    step: int
    screen: str
    screenshot: bytes | None = None
    action: str = ""
    choice: str = ""
    probability: float | None = None
    note: str = ""

    @property
    def file_name(self) -> str:
        return f"step-{self.step:02d}.png"

    @property
    def caption(self) -> str:
        if not self.action:
            return f"end · {self.note}" if self.note else "end"
        shown = (
            f"{self.action}  [{self.choice}]" if self.choice and self.choice != self.action else self.action
        )
        chance = "" if self.probability is None else f"  p={self.probability:.2f}"
        return f"{shown}{chance}" + (f"  ({self.note})" if self.note else "")


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; }}
.frames {{ display: flex; flex-wrap: wrap; gap: 1em; }}
figure {{ margin: 0; width: 220px; }}
img {{ width: 220px; border: 1px solid #999; }}
figcaption {{ font-size: 0.85em; }}
code {{ word-break: break-all; }}
</style></head><body>
<h1>{title}</h1>
<p>{summary}</p>
<div class="frames">
{frames}
</div>
</body></html>
"""


def _figure(frame: Frame) -> str:
    label = f"step {frame.step}" if frame.action else "final screen"
    image = (
        f'<img src="{png_data_url(frame.screenshot)}" alt="{html.escape(label)}">'
        if frame.screenshot
        else "<p>(no screenshot)</p>"
    )
    return (
        f"<figure>{image}<figcaption><b>{html.escape(label)}</b> · {html.escape(frame.screen)}<br>"
        f"<code>{html.escape(frame.caption)}</code></figcaption></figure>"
    )


def write_storyboard(directory: Path, title: str, summary: str, frames: Sequence[Frame]) -> Path:
    """Write each frame's screenshot as ``step-NN.png`` and ``storyboard.html``; returns the page."""
    directory.mkdir(parents=True, exist_ok=True)
    for frame in frames:
        if frame.screenshot:
            (directory / frame.file_name).write_bytes(frame.screenshot)
    page = directory / "storyboard.html"
    page.write_text(
        _PAGE.format(
            title=html.escape(title),
            summary=html.escape(summary),
            frames="\n".join(_figure(frame) for frame in frames),
        ),
        encoding="utf-8",
    )
    return page
