"""A ``uiautomator dump`` read within limits of size, depth, node count and time.

A real screen's dump is tens of kilobytes, a few dozen levels deep. A broken or hostile device
gave 58 MB nested 200,000 levels deep (accepted after 186 s at 760 MB, 7.4 MB of UI text into the
prompt and the shard) and 117 MB wide (368 s, 1.5 GB). So the dump is refused past
``max_ui_dump_bytes`` before it is read whole, and parsed incrementally, stopping at once past
``max_ui_depth`` levels, ``max_ui_nodes`` nodes or the attempt's deadline (its ``step_timeout_s``).
Each refusal is a `UiDumpLimitError` naming the limit; it is not retried (the next dump of the same
screen would be as large).
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import cast

from distrl_core.envs.observation import UIElement, elements_of, extract_hierarchy
from simulators.adb.errors import UiDumpError

CHUNK_CHARS = 64 * 1024  # parsed between two looks at the clock


class UiDumpLimitError(UiDumpError):
    """The dump is past one of the limits; the message names it and the setting that raises it."""


@dataclass(frozen=True)
class DumpLimits:
    max_bytes: int
    max_depth: int
    max_nodes: int
    where: str  # the device, for messages
    serial: str | None = None

    def too_large(self, size: int | str) -> UiDumpLimitError:
        return UiDumpLimitError(
            f"UI dump on {self.where} is larger than max_ui_dump_bytes={self.max_bytes} ({size} bytes); a "
            "screen's dump is tens of kilobytes: check the app on screen, or raise AdbEnvConfig.max_ui_dump_bytes",
            self.serial,
        )


def parse_dump(xml: str, limits: DumpLimits, deadline: float) -> list[UIElement]:
    """The dump's elements (as `parse_ui_xml`); `UiDumpLimitError` past a limit or after `deadline`
    (a `time.monotonic()` value), ValueError when it is not well-formed."""
    if len(xml) > limits.max_bytes:  # a character is at least one byte
        raise limits.too_large(f"more than {len(xml)}")
    document = extract_hierarchy(xml)
    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start", "end"))
    depth = nodes = 0
    root: ET.Element | None = None
    try:
        for start in range(0, len(document), CHUNK_CHARS):
            parser.feed(document[start : start + CHUNK_CHARS])
            for item in parser.read_events():
                event, element = cast(tuple[str, ET.Element], item)  # start and end events only
                if event == "end":
                    depth -= 1
                    continue
                depth, nodes = depth + 1, nodes + 1
                root = element if root is None else root
                if depth > limits.max_depth:
                    raise _limit(
                        limits, f"nests deeper than max_ui_depth={limits.max_depth} levels", "max_ui_depth"
                    )
                if nodes > limits.max_nodes:
                    raise _limit(
                        limits, f"has more than max_ui_nodes={limits.max_nodes} nodes", "max_ui_nodes"
                    )
            if time.monotonic() > deadline:
                raise UiDumpLimitError(
                    f"parsing the UI dump on {limits.where} did not finish within step_timeout_s (read "
                    f"{start + CHUNK_CHARS} of {len(document)} characters); raise AdbEnvConfig.step_timeout_s "
                    "if the device is just slow",
                    limits.serial,
                )
        parser.close()
    except ET.ParseError as exc:
        raise ValueError(f"UI dump is not well-formed XML: {exc}") from None
    if root is None:
        raise ValueError("UI dump holds no element")
    return elements_of(root)


def _limit(limits: DumpLimits, what: str, setting: str) -> UiDumpLimitError:
    return UiDumpLimitError(
        f"UI dump on {limits.where} {what}; a real screen's is far smaller: check the app on screen, or raise "
        f"AdbEnvConfig.{setting}",
        limits.serial,
    )
