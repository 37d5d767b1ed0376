"""Canonical actions -> Android shell commands (``input``, ``monkey``), and quoting for ``input text``.

``input text`` cannot type a space directly (it splits on them): Android's ``input`` turns ``%s`` into a
space, so spaces become ``%s`` and the whole argument is single-quoted for the device's ``sh``. A
literal ``%s`` in the text therefore also arrives as a space (a limit of ``input text`` itself), and
newlines are sent as ENTER key presses between the pieces.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

from distrl_core.envs.actions import KEYCODES, Action, ActionKind, swipe_endpoints, to_pixels
from distrl_core.envs.observation import UIElement
from simulators.simdroid.catalog import APPS

# How a long press is done from a shell: a swipe that does not move, held this long.
LONG_PRESS_MS = 800
SWIPE_MS = 300
LAUNCHER_CATEGORY = "android.intent.category.LAUNCHER"

# Display name (lower case) -> package, for open_app("Settings"). Real-device users extend it in the config.
DEFAULT_APP_PACKAGES: dict[str, str] = {app.name.lower(): app.package for app in APPS}


class UnexecutableAction(ValueError):
    """A well-formed action that cannot be carried out on this screen (e.g. an element index past the end)."""


def input_text_argument(text: str) -> str:
    """The shell-quoted argument for ``input text`` that types ``text`` (no newlines)."""
    return shlex.quote(text.replace(" ", "%s"))


def type_text_commands(text: str) -> list[str]:
    commands: list[str] = []
    for number, piece in enumerate(text.split("\n")):
        if number:
            commands.append(f"input keyevent {KEYCODES['ENTER']}")
        if piece:
            commands.append(f"input text {input_text_argument(piece)}")
    return commands


def _target_pixels(
    action: Action, elements: Sequence[UIElement], screen_size: tuple[int, int]
) -> tuple[int, int]:
    if action.index is not None:
        if not 0 <= action.index < len(elements):
            raise UnexecutableAction(
                f"element index {action.index} is not on screen (0..{len(elements) - 1})"
            )
        return elements[action.index].center
    assert action.point is not None
    return to_pixels(action.point, screen_size)


def resolve_package(app: str, app_packages: Mapping[str, str]) -> str:
    """An app's package from its display name (case-insensitive) or the package itself."""
    package = app_packages.get(app.strip().lower())
    if package:
        return package
    if "." in app and " " not in app.strip():
        return app.strip()
    raise UnexecutableAction(f"no package known for app {app!r}; add it to AdbEnvConfig.app_packages")


def action_to_commands(
    action: Action,
    elements: Sequence[UIElement],
    screen_size: tuple[int, int],
    app_packages: Mapping[str, str] = DEFAULT_APP_PACKAGES,
) -> list[str]:
    """Shell commands that perform ``action``; [] for status and invalid actions (nothing to do)."""
    kind = action.kind
    if kind is ActionKind.TAP:
        x, y = _target_pixels(action, elements, screen_size)
        return [f"input tap {x} {y}"]
    if kind is ActionKind.LONG_PRESS:
        x, y = _target_pixels(action, elements, screen_size)
        return [f"input swipe {x} {y} {x} {y} {LONG_PRESS_MS}"]
    if kind is ActionKind.SWIPE:
        start, end = swipe_endpoints(action)
        (x1, y1), (x2, y2) = to_pixels(start, screen_size), to_pixels(end, screen_size)
        return [f"input swipe {x1} {y1} {x2} {y2} {SWIPE_MS}"]
    if kind is ActionKind.TYPE:
        return type_text_commands(action.text or "")
    if kind is ActionKind.KEY:
        return [f"input keyevent {action.keycode}"]
    if kind is ActionKind.OPEN_APP:
        package = resolve_package(action.text or "", app_packages)
        return [f"monkey -p {shlex.quote(package)} -c {LAUNCHER_CATEGORY} 1"]
    return []
