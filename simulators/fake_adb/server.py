"""The fake ADB server: SimDroid phones served over the real ADB host protocol, plus emulator consoles.

``FakeAdbServer`` runs in background threads (tests, benchmarks); ``run_fake_adb`` blocks until Ctrl-C
(what ``distrl fake-adb --port P --devices N`` calls). Clients: adbutils, Debian's ``adb -P P``, or the
project's :class:`~simulators.adb.AdbEnv`.

``adb emu CMD`` finds a console the way it finds an emulator's: from the serial (``emulator-5554``: the
console on 127.0.0.1:5554), sending ``auth <token>`` read from ``~/.emulator_console_auth_token``
first. So it reaches a fake device only when the consoles sit on the serials' ports
(``console_base_port``; ``distrl fake-adb`` does this, on 5554, 5556, ... by default) and the token
file in the client's home is the server's. A real emulator's adbd also listens on the odd port of the
pair (5555); the fake serves no adbd port: the fake server is itself the adb server.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from simulators.fake_adb.console import DEFAULT_AUTH_TOKEN_PATH, FakeEmulatorConsole
from simulators.fake_adb.device import FakeDevice
from simulators.fake_adb.host_services import DeviceTable
from simulators.fake_adb.services import handle_connection
from simulators.fake_adb.tcp import TcpService
from simulators.simdroid.device import FaultConfig, SimDroid, SimDroidConfig
from simulators.simdroid.render import DEJAVU_SANS

logger = logging.getLogger(__name__)

FIRST_EMULATOR_PORT = 5554


class ConsolePortError(OSError):
    """An emulator console could not listen on its port (``port``)."""

    def __init__(self, error: OSError, port: int) -> None:
        super().__init__(error.errno, error.strerror)
        self.port = port


@dataclass
class FakeAdbConfig:
    """Everything about a fake ADB server.

    host: interface to listen on; keep loopback unless other machines must reach it.
    port: adb server port (the real one uses 5037); 0 picks a free port, read it from ``server.port``.
    devices: how many SimDroid phones to serve (serials emulator-5554, emulator-5556, ...).
    seed: base seed; device ``i`` seeds its fault model with ``faults.seed + 1000 * seed + i`` (and its
        distractor dialogs likewise) so devices differ from each other but the whole server is reproducible.
    faults: SimDroid's latency/fault model for every device (None: all faults off).
    console_base_port: first emulator console port; device ``i`` listens on ``console_base_port + 2*i``
        and is named ``emulator-<that port>`` like a real emulator, so ``adb emu`` finds it. None:
        consoles on free ports (see ``server.console_port(serial)``; ``adb emu`` cannot find those),
        serials from emulator-5554.
    console_auth_token_path: the console's auth token file (created with a random token when missing;
        an empty file turns auth off). None: ``~/.emulator_console_auth_token``, like the emulator.
    idle_error_prob: chance that a ``uiautomator dump`` fails with "could not get idle state" (an
        ADB-level fault, drawn from its own seeded stream per device).
    simdroid: screen size and distractor-dialog rate of each phone (its ``faults`` and ``seed`` are
        replaced per device as described above; its ``screenshot_scale`` is not used, see screen_scale).
    screen_scale: the served phone's screen is ``simdroid``'s width x height times this (1.0: 1080x2400).
        ``wm size``, ``screencap``, ``uiautomator dump`` bounds and ``input`` all use that one size, as on
        a real device, so a client may tap at screenshot pixels. 0.25 (270x600) renders ~10x faster.
    serials: the devices' serials instead of emulator-5554, ... (e.g. a network device's
        ``127.0.0.1:5555``, which ``host:connect``/``host:disconnect`` then attach and detach).
    idle_timeout_s: a client connection that sends nothing for this long is closed, so abandoned or
        half-open connections do not each hold a server thread forever (None: never).
    server_version: what ``host:version`` answers; 41 matches adb 1.0.41 (platform-tools 29+). A
        command-line adb whose version differs kills the server and starts its own, so keep it equal to
        the client's (``adb version``).
    """

    host: str = "127.0.0.1"
    port: int = 0
    devices: int = 1
    seed: int = 0
    faults: FaultConfig | None = None
    console_base_port: int | None = None
    console_auth_token_path: Path | None = None
    idle_error_prob: float = 0.0
    simdroid: SimDroidConfig = field(default_factory=SimDroidConfig)
    server_version: int = 41
    screen_scale: float = 1.0
    serials: tuple[str, ...] | None = None
    idle_timeout_s: float | None = 60.0

    def __post_init__(self) -> None:
        if not 0.0 < self.screen_scale <= 1.0:
            raise ValueError(f"screen_scale must be in (0, 1], got {self.screen_scale} (0.25 serves 270x600)")
        if self.idle_timeout_s is not None and self.idle_timeout_s <= 0:
            raise ValueError(f"idle_timeout_s must be > 0 seconds or None, got {self.idle_timeout_s}")
        if self.serials is not None and (
            len(self.serials) != self.devices
            or len(set(self.serials)) != self.devices
            or not all(self.serials)
        ):
            raise ValueError(f"serials must name each of the {self.devices} devices once, got {self.serials}")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be 0..65535 (0 = any free port), got {self.port}")
        if self.devices < 1:
            raise ValueError(f"devices must be at least 1, got {self.devices}")
        if self.console_base_port is not None and not 1 <= self.console_base_port <= 65535 - 2 * self.devices:
            raise ValueError(
                f"console_base_port {self.console_base_port} leaves no room for {self.devices} consoles "
                "(two ports apart); pick e.g. 5554 or leave it None for free ports"
            )
        if not 0.0 <= self.idle_error_prob <= 1.0:
            raise ValueError(f"idle_error_prob must be a probability in [0, 1], got {self.idle_error_prob}")
        if not 30 <= self.server_version <= 0xFFFF:
            raise ValueError(
                f"server_version must look like adb's (e.g. 41 for 1.0.41), got {self.server_version}"
            )

    def device_serials(self) -> list[str]:
        if self.serials is not None:
            return list(self.serials)
        first = self.console_base_port or FIRST_EMULATOR_PORT
        return [f"emulator-{first + 2 * index}" for index in range(self.devices)]


class FakeAdbServer:
    """A running fake ADB server. ``with FakeAdbServer(config) as server: ... server.port``."""

    def __init__(self, config: FakeAdbConfig | None = None):
        self.config = config or FakeAdbConfig()
        faults = self.config.faults or FaultConfig()
        devices = []
        for index, serial in enumerate(self.config.device_serials()):
            offset = 1000 * self.config.seed + index
            device_faults = dataclasses.replace(faults, seed=faults.seed + offset)
            base = self.config.simdroid
            phone_config = dataclasses.replace(
                base,
                faults=device_faults,
                seed=base.seed + offset,
                # One size for everything a client sees: the screenshot is the whole screen, 1:1.
                width=max(100, round(base.width * self.config.screen_scale)),
                height=max(100, round(base.height * self.config.screen_scale)),
                screenshot_scale=1.0,
            )
            phone = SimDroid(phone_config, serial=serial)
            devices.append(
                FakeDevice(
                    phone,
                    transport_id=index + 1,
                    idle_error_prob=self.config.idle_error_prob,
                    seed=self.config.seed,
                )
            )
        self.table = DeviceTable(devices, self.config.host)
        self._adb: TcpService | None = None
        self._consoles: dict[str, FakeEmulatorConsole] = {}
        self._stopped = threading.Event()

    @property
    def devices(self) -> list[FakeDevice]:
        return self.table.devices

    def device(self, serial: str) -> FakeDevice:
        for device in self.devices:
            if device.serial == serial:
                return device
        raise KeyError(f"no fake device {serial!r}; serving {[d.serial for d in self.devices]}")

    @property
    def port(self) -> int:
        if self._adb is None:
            raise RuntimeError("the fake adb server is not started: call start() first")
        return self._adb.port

    def console_port(self, serial: str) -> int:
        return self._consoles[serial].port

    @property
    def console_token_path(self) -> Path:
        return self.config.console_auth_token_path or DEFAULT_AUTH_TOKEN_PATH

    def start(self) -> FakeAdbServer:
        config = self.config
        try:
            for index, device in enumerate(self.devices):
                console_port = 0 if config.console_base_port is None else config.console_base_port + 2 * index
                try:
                    console = FakeEmulatorConsole(
                        device, config.host, console_port, self.console_token_path, config.idle_timeout_s
                    )
                except OSError as error:
                    raise ConsolePortError(error, console_port) from error
                console.start()
                self._consoles[device.serial] = console
            self._adb = TcpService(
                config.host,
                config.port,
                self._handle,
                name="fake-adb-server",
                idle_timeout_s=config.idle_timeout_s,
            )
            self._adb.start()
        except BaseException:
            self.stop()
            raise
        logger.info(
            "fake adb server on %s:%d serving %s", config.host, self.port, [d.serial for d in self.devices]
        )
        return self

    def _handle(self, sock: socket.socket) -> None:
        handle_connection(sock, self.table, self.config.server_version, self._stop_in_background)

    def _stop_in_background(self) -> None:
        # host:kill arrives on a handler thread, which stop() joins: stop from another thread.
        threading.Thread(target=self.stop, name="fake-adb-kill", daemon=True).start()

    def stop(self) -> None:
        """Close every listener and connection and join all threads. Safe to call more than once."""
        for device in self.devices:
            device.stopping.set()
        if self._adb is not None:
            self._adb.stop()
        self.table.forwards.remove_all()
        for console in self._consoles.values():
            console.stop()
        self._stopped.set()

    def wait_stopped(self, timeout: float | None = None) -> bool:
        """Block until the server stops (``stop()`` or a client's ``host:kill``)."""
        return self._stopped.wait(timeout)

    def __enter__(self) -> FakeAdbServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()


def run_fake_adb(
    port: int,
    devices: int,
    seed: int = 0,
    faults: FaultConfig | None = None,
    console_base_port: int | None = None,
    host: str = "127.0.0.1",
    readable: bool = False,
) -> None:
    """Serve ``devices`` SimDroid phones on ``host:port`` until Ctrl-C or ``adb kill-server``;
    ``readable``: 540x1200 phones whose screenshots an OCR reads (DejaVu Sans), for the screen
    observation."""
    look: dict[str, Any] = (
        {"simdroid": SimDroidConfig(font=DEJAVU_SANS), "screen_scale": 0.5} if readable else {}
    )
    config = FakeAdbConfig(
        host=host,
        port=port,
        devices=devices,
        seed=seed,
        faults=faults,
        console_base_port=console_base_port,
        **look,
    )
    server = FakeAdbServer(config).start()
    consoles = ", ".join(
        f"{serial} console {server.console_port(serial)}" for serial in config.device_serials()
    )
    print(f"fake adb server listening on {host}:{server.port} ({consoles}); Ctrl-C to stop", flush=True)
    try:
        while not server.wait_stopped(timeout=0.5):  # a timed wait keeps Ctrl-C responsive
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
