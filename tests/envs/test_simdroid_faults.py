"""The fault model: each fault happens, is seeded, and is survivable through SimDroidEnv."""

from __future__ import annotations

import io
import statistics
import time

import pytest
from PIL import Image

from simulators.simdroid import (
    DeviceOffline,
    FaultConfig,
    ResetFailed,
    SimDroid,
    SimDroidConfig,
    get_task,
)
from simulators.simdroid.faults import FaultModel


def make(**faults: object) -> SimDroid:
    device = SimDroid(SimDroidConfig(faults=FaultConfig(**faults)))
    device.load_task(get_task("general-train-0000"))
    return device


def test_faults_are_off_by_default() -> None:
    device = make()
    for _ in range(50):
        device.tap(540, 400)
        device.keyevent(3)
        Image.open(io.BytesIO(device.screenshot_png())).verify()
    assert device.virtual_time_s == 0.0
    assert all(count == 0 for count in device.faults.counts.values())


def test_emulator_latency_is_heavy_tailed_and_virtual_time_adds_up() -> None:
    model = FaultModel(FaultConfig(latency="emulator", latency_scale_s=0.5, latency_mode="virtual", seed=1))
    samples = [model.sample_latency() for _ in range(4000)]
    median = statistics.median(samples)
    assert 0.4 < median < 0.6
    p999 = sorted(samples)[int(len(samples) * 0.999)]
    assert p999 > 5 * median  # the tail: rare steps many times slower than usual
    assert max(samples) <= 0.5 * 50  # capped

    device = make(latency="emulator", latency_scale_s=0.5, latency_mode="virtual")
    for _ in range(20):
        device.tap(10, 10)
    assert device.virtual_time_s > 20 * 0.1


def test_dropped_taps_do_nothing() -> None:
    device = make(drop_tap_prob=1.0)
    device.tap(415, 410)  # the Clock icon
    assert device.state.package == "com.android.launcher3"
    assert device.faults.counts["dropped_taps"] == 1
    device = make(drop_tap_prob=0.5, seed=4)
    outcomes = []
    for _ in range(40):
        device.tap(415, 410)
        outcomes.append(device.state.package != "com.android.launcher3")
        device.keyevent(3)
    assert 5 < sum(outcomes) < 35


def test_offline_device_refuses_calls_then_comes_back() -> None:
    device = make(offline_duration_s=0.05)
    device.faults.config.offline_prob = 1.0  # after the reset, which would itself fail
    with pytest.raises(DeviceOffline):
        device.tap(10, 10)
    assert not device.online
    with pytest.raises(DeviceOffline):
        device.ui_xml()
    with pytest.raises(DeviceOffline):
        device.check_online()
    deadline = time.monotonic() + 10
    while not device.online and time.monotonic() < deadline:
        time.sleep(0.01)
    assert device.online
    device.screenshot_png()  # reads work again; the next input may start another outage


def test_corrupt_screenshots_come_in_three_kinds() -> None:
    device = make(corrupt_screenshot_prob=1.0)
    kinds = set()
    for _ in range(40):
        png = device.screenshot_png()
        try:
            with Image.open(io.BytesIO(png)) as image:
                image.load()
                colors = image.getcolors(2)
            kinds.add("white" if colors == [(image.width * image.height, (255, 255, 255))] else "black")
        except OSError:
            kinds.add("truncated")
    assert kinds == {"truncated", "white", "black"}


def test_failed_reset_keeps_the_old_state() -> None:
    device = make()
    device.tap(415, 410)
    before = device.snapshot()
    device.faults.config.reset_fail_prob = 1.0
    with pytest.raises(ResetFailed):
        device.load_task(get_task("general-train-0001"))
    assert device.snapshot() == before


def test_fault_sequences_are_seeded() -> None:
    def events(seed: int) -> list[bool]:
        model = FaultModel(FaultConfig(seed=seed, drop_tap_prob=0.3))
        return [model.drop_tap() for _ in range(50)]

    assert events(1) == events(1)
    assert events(1) != events(2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"latency": "slow"}, "latency must be one of"),
        ({"latency": "emulator"}, "latency_scale_s > 0"),
        ({"latency_mode": "fast"}, "latency_mode"),
        ({"drop_tap_prob": 2.0}, "drop_tap_prob"),
    ],
)
def test_fault_config_errors_name_the_field(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FaultConfig(**kwargs)


def test_an_interrupt_cuts_a_sleeping_latency_short():
    import threading

    # A 10-minute median wait: without the interrupt the thread would still be asleep at the join.
    model = FaultModel(FaultConfig(seed=0, latency="emulator", latency_scale_s=600.0, latency_mode="sleep"))
    model.interrupt = threading.Event()
    waited: list[float] = []
    sleeper = threading.Thread(target=lambda: waited.append(model.apply_latency()), daemon=True)
    sleeper.start()
    model.interrupt.set()
    sleeper.join(timeout=30)
    assert not sleeper.is_alive() and waited and waited[0] > 60  # the drawn latency, not the time slept
