"""A device whose `uiautomator dump` is huge, deep or broken, through the fake ADB server's real
wire protocol: each is refused at once, naming the limit (a 58 MB dump nested 200,000 levels deep was
accepted after 186 s at 760 MB, a 117 MB wide one after 368 s at 1.5 GB), and a malformed dump no
longer blames an animating screen."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from simulators.adb import AdbEnvConfig, UiDumpError
from simulators.adb.dump import UiDumpLimitError
from simulators.adb.link import AdbDeviceLink
from simulators.fake_adb import FakeAdbConfig, FakeAdbServer

SERIAL = "emulator-5554"
NODE = '<node text="" class="android.widget.FrameLayout" bounds="[0,0][1080,1920]" clickable="true">'
HEAD = "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\">"


def deep(levels: int) -> str:
    return HEAD + NODE * levels + "</node>" * levels + "</hierarchy>"


def wide(nodes: int) -> str:
    return HEAD + (NODE + "</node>") * nodes + "</hierarchy>"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeAdbServer]:
    monkeypatch.setenv("ADBUTILS_ADB_PATH", "/bin/false")  # never spawn a real adb daemon
    token = tmp_path / "token"
    token.write_text("t\n")
    with FakeAdbServer(FakeAdbConfig(devices=1, console_auth_token_path=token)) as started:
        yield started


def _link(server: FakeAdbServer, screen: str, **overrides: object) -> AdbDeviceLink:
    server.device(SERIAL).phone.ui_xml = lambda: screen  # type: ignore[method-assign]
    settings: dict = {"port": server.port, "serial": SERIAL, "retry_delay_s": 0.0, "step_timeout_s": 30.0}
    link = AdbDeviceLink(AdbEnvConfig(**(settings | overrides)))
    link.connect()
    return link


@pytest.mark.parametrize("pull_with", ["sync", "cat"])
def test_a_dump_larger_than_the_cap_is_refused_naming_it(server: FakeAdbServer, pull_with: str) -> None:
    link = _link(server, wide(40_000), pull_with=pull_with, max_ui_dump_bytes=1024 * 1024)  # ~4 MB
    with pytest.raises(UiDumpLimitError, match="max_ui_dump_bytes=1048576") as caught:
        link.ui_dump()
    assert SERIAL in str(caught.value) and "\n" not in str(caught.value)


def test_a_deep_dump_is_refused_at_the_depth_limit(server: FakeAdbServer) -> None:
    link = _link(server, deep(30_000), max_ui_depth=256)  # ~3 MB, under the default size cap
    with pytest.raises(UiDumpLimitError, match="max_ui_depth=256"):
        link.ui_dump()


def test_a_wide_dump_is_refused_at_the_node_limit(server: FakeAdbServer) -> None:
    link = _link(server, wide(5_000), max_ui_nodes=1_000)
    with pytest.raises(UiDumpLimitError, match="max_ui_nodes=1000"):
        link.ui_dump()


def test_a_dump_within_the_limits_is_parsed(server: FakeAdbServer) -> None:
    xml, elements = _link(server, deep(200), max_ui_depth=256).ui_dump()
    assert len(elements) == 200 and xml.count("<node") == 200


def test_a_malformed_dump_names_the_xml_not_an_animating_screen(server: FakeAdbServer) -> None:
    link = _link(server, HEAD + NODE + "<node", ui_dump_retries=1)
    with pytest.raises(UiDumpError, match="not readable XML 2 times") as caught:
        link.ui_dump()
    assert "animating" not in str(caught.value) and not isinstance(caught.value, UiDumpLimitError)


def test_the_limits_are_checked_in_the_config() -> None:
    with pytest.raises(ValueError, match="max_ui_depth must be >= 8"):
        AdbEnvConfig(max_ui_depth=0)
