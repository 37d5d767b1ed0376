"""SimDroid at the device level: pixels, keycodes, settings, snapshots, distractors."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from distrl_core.envs.observation import UIElement, parse_ui_xml
from simulators.simdroid import SimDroid, SimDroidConfig, UnknownPackage, get_task, load_tasks
from simulators.simdroid.catalog import APPS, APPS_PER_PAGE, CHROME, CLOCK, LAUNCHER, SETTINGS


def find(device: SimDroid, **match: object) -> UIElement:
    for el in device.elements():
        if all(getattr(el, key) == value for key, value in match.items()):
            return el
    raise AssertionError(f"no element with {match} in {[el.label for el in device.elements()]}")


def tap(device: SimDroid, **match: object) -> None:
    device.tap(*find(device, **match).center)


@pytest.fixture
def device() -> SimDroid:
    d = SimDroid()
    d.load_task(get_task("general-train-0000"))
    return d


def test_launcher_opens_apps_and_home_returns(device: SimDroid) -> None:
    assert device.current_activity().startswith(LAUNCHER + "/")
    tap(device, text="Settings")
    assert device.current_activity() == f"{SETTINGS}/.Settings"
    assert device.state.package == SETTINGS
    device.keyevent("KEYCODE_HOME")
    assert device.state.package == LAUNCHER


def test_swiping_the_launcher_reveals_the_second_page(device: SimDroid) -> None:
    hidden = APPS[APPS_PER_PAGE].name
    assert hidden not in [el.text for el in device.elements()]
    device.swipe(900, 1200, 150, 1200)
    assert hidden in [el.text for el in device.elements()]
    device.swipe(150, 1200, 900, 1200)
    assert hidden not in [el.text for el in device.elements()]


def test_settings_switches_change_android_settings(device: SimDroid) -> None:
    assert device.settings_get("global", "wifi_on") == "1"
    tap(device, text="Settings")
    tap(device, text="Network & internet")
    assert device.current_activity() == f"{SETTINGS}/.SubSettings"
    assert find(device, text="Wi-Fi").checked
    tap(device, text="Wi-Fi")
    assert device.settings_get("global", "wifi_on") == "0"
    assert not find(device, text="Wi-Fi").checked
    device.settings_put("global", "wifi_on", "1")  # what `adb shell settings put` does
    assert find(device, text="Wi-Fi").checked
    device.keyevent(4)
    assert device.state.page["name"] == "main"
    assert device.settings_get("global", "no_such_setting") is None


def test_brightness_slider_follows_the_tap_and_the_drag(device: SimDroid) -> None:
    tap(device, text="Settings")
    tap(device, text="Display")
    x1, y1, x2, y2 = find(device, content_desc="Brightness").bounds
    device.tap(x1 + (x2 - x1) // 4, (y1 + y2) // 2)
    assert abs(int(device.settings_get("system", "screen_brightness")) - 64) <= 2
    device.swipe(x1 + 5, (y1 + y2) // 2, x2 - 1, (y1 + y2) // 2)
    assert device.settings_get("system", "screen_brightness") == "255"
    assert find(device, content_desc="Brightness").text == "100%"


def test_text_fields_focus_select_type_and_submit(device: SimDroid) -> None:
    device.input_text("ignored")  # nothing focused: typing goes nowhere
    device.start_app(CHROME)
    url = find(device, resource_id=f"{CHROME}:id/url_bar")
    device.tap(*url.center)
    assert find(device, resource_id=f"{CHROME}:id/url_bar").focused
    device.input_text("gizmo")
    device.input_text("hub.comX")
    device.keyevent(67)  # DEL
    assert find(device, resource_id=f"{CHROME}:id/url_bar").text == "gizmohub.com"
    device.keyevent(66)  # ENTER
    assert device.state.page["name"] == "site" and device.state.page["domain"] == "gizmohub.com"
    # tapping the URL bar again selects the current URL: typing replaces it
    device.tap(*find(device, resource_id=f"{CHROME}:id/url_bar").center)
    device.input_text("tab\x07 with control\nchars")
    assert find(device, resource_id=f"{CHROME}:id/url_bar").text == "tab with controlchars"
    device.keyevent("BACK")  # first BACK hides the keyboard
    assert device.state.focus is None and device.state.page["name"] == "site"
    device.keyevent("BACK")  # then goes back a page
    assert device.state.page["name"] == "newtab"


def test_shop_flow_puts_the_product_in_the_cart(device: SimDroid) -> None:
    task = next(t for t in load_tasks("webshop", "train") if t.kind == "shop_add_to_cart")
    device.load_task(task)
    domain, query = task.params["site"], task.params["query"]
    device.start_app(CHROME)
    tap(device, resource_id=f"{CHROME}:id/url_bar")
    device.input_text(domain)
    device.keyevent(66)
    tap(device, resource_id=f"{domain}:id/search")
    device.input_text(query)
    tap(device, text="Search")
    assert not device.is_successful(task)
    tap(device, resource_id=f"{domain}:id/product_title")
    assert task.params["product_name"] in [el.text for el in device.elements()]
    tap(device, text="Add to cart")
    assert device.is_successful(task)
    assert find(device, resource_id=f"{domain}:id/cart").text == "Cart (1)"


def test_app_management(device: SimDroid) -> None:
    with pytest.raises(UnknownPackage):
        device.start_app("com.example.not.installed")
    device.start_app(CLOCK)
    assert device.state.package == CLOCK
    device.force_stop(SETTINGS)  # not in the foreground: nothing happens
    assert device.state.package == CLOCK
    device.force_stop(CLOCK)
    assert device.state.package == LAUNCHER
    device.start_app(CLOCK)
    device.start_app(LAUNCHER)
    assert device.state.package == LAUNCHER


def test_snapshot_restore_reproduces_state_screens_and_future(device: SimDroid) -> None:
    device = SimDroid(SimDroidConfig(distractor_prob=0.5))
    device.load_task(get_task("webshop-train-0030"), seed=7)
    device.start_app(CHROME)
    blob = device.snapshot()
    shot, xml = device.screenshot_png(), device.ui_xml()

    def continue_episode() -> list[str]:
        seen = []
        for _ in range(6):
            el = next((e for e in device.elements() if e.clickable), None)
            device.tap(*el.center)
            seen.append(device.ui_xml())
        return seen

    first = continue_episode()
    device.restore(blob)
    assert device.screenshot_png() == shot and device.ui_xml() == xml
    assert continue_episode() == first  # the distractor RNG was restored too
    with pytest.raises(ValueError):
        device.restore(b"not a snapshot")


def test_screenshot_is_a_png_at_the_configured_scale() -> None:
    device = SimDroid(SimDroidConfig(width=720, height=1280, screenshot_scale=0.5))
    device.load_task(get_task("general-train-0001"))
    home = device.screenshot_png()
    with Image.open(io.BytesIO(home)) as image:
        assert image.size == (360, 640)
    tap(device, text="Chrome")
    assert device.screenshot_png() != home
    assert device.size == (720, 1280)


def test_xml_and_elements_agree_on_every_screen_the_shop_flow_visits(device: SimDroid) -> None:
    device.start_app(CHROME)
    screens = 0
    for _ in range(12):
        els = device.elements()
        assert parse_ui_xml(device.ui_xml()) == els
        screens += 1
        candidates = [e for e in els if e.clickable and not e.editable]
        device.tap(*candidates[screens % len(candidates)].center)
    assert screens == 12


def test_distractor_dialogs_are_modal_and_must_be_dismissed() -> None:
    device = SimDroid(SimDroidConfig(distractor_prob=1.0, seed=3))
    device.load_task(get_task("general-train-0000"), seed=1)
    tap(device, text="Clock")
    assert device.state.dialog is not None
    labels = [el.text for el in device.elements()]
    assert "Alarm" not in labels  # the page under the dialog is not reachable
    device.tap(540, 2300)  # outside the dialog
    assert device.state.dialog is not None
    device.keyevent("BACK")
    assert device.state.dialog is None and device.state.package == CLOCK
    # a "harmful" button does what it says rather than just closing the dialog
    for _ in range(30):
        device.load_task(get_task("general-train-0000"))
        tap(device, text="Clock")
        if (device.state.dialog or {}).get("kind") == "rate":
            tap(device, text="Rate now")
            assert device.state.package == "com.android.vending"
            break
    else:
        pytest.fail("the rate-us dialog never appeared in 30 page changes")


def test_distractors_are_reproducible_from_the_seed() -> None:
    def dialogs(seed: int) -> list[str | None]:
        device = SimDroid(SimDroidConfig(distractor_prob=0.5))
        device.load_task(get_task("general-train-0000"), seed=seed)
        kinds = []
        for _ in range(10):
            tap(device, text="Settings")
            kinds.append((device.state.dialog or {}).get("kind"))
            device.keyevent(3)
        return kinds

    assert dialogs(1) == dialogs(1)
    assert dialogs(1) != dialogs(2)
    assert any(kind is None for kind in dialogs(1)) and any(kind is not None for kind in dialogs(1))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"width": 50}, "width and height"),
        ({"screenshot_scale": 0.0}, "screenshot_scale"),
        ({"distractor_prob": 1.5}, "distractor_prob"),
    ],
)
def test_config_errors_name_the_field(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SimDroidConfig(**kwargs)
