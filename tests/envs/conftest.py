"""Fixtures for the ADB tests: fake ADB servers on loopback, and a guard against adb daemons.

adbutils runs ``adb start-server`` (port 5037) whenever it cannot connect; pointing it at /bin/false makes
a missing server fail fast instead of spawning a daemon behind the test's back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from simulators.fake_adb import FakeAdbConfig, FakeAdbServer


@pytest.fixture
def no_adb_daemon(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADBUTILS_ADB_PATH", "/bin/false")
    monkeypatch.delenv("ANDROID_SERIAL", raising=False)
    monkeypatch.delenv("ANDROID_ADB_SERVER_PORT", raising=False)


@pytest.fixture
def console_token(tmp_path: Path) -> Path:
    path = tmp_path / "emulator_console_auth_token"
    path.write_text("test-token-123\n")
    return path


@pytest.fixture
def start_fake_adb(no_adb_daemon: None, console_token: Path) -> Iterator[Callable[..., FakeAdbServer]]:
    """``start_fake_adb(devices=2, faults=...)`` -> a started server, stopped after the test."""
    servers: list[FakeAdbServer] = []

    def start(**overrides: object) -> FakeAdbServer:
        overrides.setdefault("console_auth_token_path", console_token)
        server = FakeAdbServer(FakeAdbConfig(**overrides)).start()  # type: ignore[arg-type]
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def fake_adb(start_fake_adb: Callable[..., FakeAdbServer]) -> FakeAdbServer:
    """One fake server with two healthy devices (emulator-5554, emulator-5556)."""
    return start_fake_adb(devices=2)
