"""The whole mutable state of a SimDroid device, as plain JSON-able data.

Everything the screen shows is a pure function of this state (see ``screens.py``), so snapshot and
restore are a JSON round trip, and success checks read it directly. A page is a dict with at least
``app`` (package) and ``name``; the page stack's bottom is always the launcher's home screen.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import asdict, dataclass, field
from typing import Any

from simulators.simdroid.catalog import DEFAULT_BRIGHTNESS, LAUNCHER, TOGGLES

Page = dict[str, Any]

SNAPSHOT_FORMAT = 1


def home_page(launcher_page: int = 0) -> Page:
    return {"app": LAUNCHER, "name": "home", "page": launcher_page}


def default_settings() -> dict[str, dict[str, str]]:
    settings: dict[str, dict[str, str]] = {"system": {}, "secure": {}, "global": {}}
    for toggle in TOGGLES:
        settings[toggle.namespace][toggle.setting] = (
            toggle.on_value if toggle.default_on else toggle.off_value
        )
    settings["system"]["screen_brightness"] = str(DEFAULT_BRIGHTNESS)
    settings["system"]["screen_brightness_mode"] = "0"
    settings["global"]["device_name"] = "SimDroid"
    return settings


@dataclass
class DeviceState:
    settings: dict[str, dict[str, str]] = field(default_factory=default_settings)
    stack: list[Page] = field(default_factory=lambda: [home_page()])
    fields: dict[str, str] = field(default_factory=dict)  # text-field contents by field key
    focus: str | None = None  # key of the focused text field
    replace_on_type: bool = False  # focusing selects all, so the next typed text replaces it
    alarms: list[dict[str, Any]] = field(default_factory=list)  # {"hour", "minute", "enabled"}
    # shop domain -> items added, each {"id", "name", "price_cents"}
    carts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    dialog: dict[str, Any] | None = None  # modal distractor on top of the page
    notice: str | None = None  # transient message ("Added to cart"), cleared on navigation
    visited_sites: list[str] = field(default_factory=list)
    task_id: str | None = None
    nav_count: int = 0  # page changes so far; distractors roll when it moves

    @property
    def page(self) -> Page:
        return self.stack[-1]

    @property
    def package(self) -> str:
        return str(self.page["app"])

    # -- navigation --------------------------------------------------------------------------
    def push(self, page: Page) -> None:
        self.nav_count += 1
        self.stack.append(page)
        self.focus = None
        self.notice = None

    def replace_top(self, page: Page) -> None:
        self.nav_count += 1
        self.stack[-1] = page
        self.focus = None
        self.notice = None

    def pop(self) -> None:
        self.nav_count += 1
        if len(self.stack) > 1:
            self.stack.pop()
        self.focus = None
        self.notice = None

    def go_home(self) -> None:
        self.nav_count += 1
        self.stack = [home_page()]
        self.focus = None
        self.notice = None

    def open_app_root(self, page: Page) -> None:
        """Launching an app starts from the home screen plus that app's root page, like a fresh task."""
        self.nav_count += 1
        self.stack = [home_page(), page]
        self.focus = None
        self.notice = None

    def focus_field(self, key: str, current_text: str | None = None) -> None:
        if current_text is not None:
            self.fields[key] = current_text
        self.fields.setdefault(key, "")
        self.focus = key
        self.replace_on_type = True

    def setting(self, namespace: str, key: str) -> str | None:
        return self.settings.get(namespace, {}).get(key)

    # -- snapshot ----------------------------------------------------------------------------
    def to_bytes(self, extra: dict[str, Any] | None = None) -> bytes:
        payload = {"format": SNAPSHOT_FORMAT, "state": asdict(self), "extra": extra or {}}
        return zlib.compress(json.dumps(payload, separators=(",", ":")).encode(), level=1)

    @classmethod
    def from_bytes(cls, blob: bytes) -> tuple[DeviceState, dict[str, Any]]:
        try:
            payload = json.loads(zlib.decompress(blob))
        except (zlib.error, ValueError) as exc:
            raise ValueError(f"not a SimDroid snapshot: {exc}") from exc
        if not isinstance(payload, dict) or payload.get("format") != SNAPSHOT_FORMAT:
            raise ValueError(f"unsupported SimDroid snapshot format (expected {SNAPSHOT_FORMAT})")
        try:
            state = cls(**payload["state"])
        except TypeError as exc:
            raise ValueError(f"corrupt SimDroid snapshot: {exc}") from exc
        return state, payload.get("extra", {})
