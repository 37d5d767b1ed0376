"""Static facts of the simulated phone: installed apps, settings toggles, shop sites, and the
deterministic search/product content those sites serve. Shared by the apps, the tasks, the success
checks and the scripted expert so that they cannot disagree."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

LAUNCHER = "com.android.launcher3"
SETTINGS = "com.android.settings"
CLOCK = "com.google.android.deskclock"
CHROME = "com.android.chrome"


@dataclass(frozen=True)
class App:
    name: str
    package: str
    activity: str  # launch activity, as `am start -n package/activity` takes it


# Launcher order: the first APPS_PER_PAGE are on the first home page, the rest one swipe left.
APPS: tuple[App, ...] = (
    App("Settings", SETTINGS, ".Settings"),
    App("Clock", CLOCK, "com.android.deskclock.DeskClock"),
    App("Chrome", CHROME, "com.google.android.apps.chrome.Main"),
    App("Camera", "com.android.camera2", "com.android.camera.CameraLauncher"),
    App("Gmail", "com.google.android.gm", ".ConversationListActivityGmail"),
    App("Maps", "com.google.android.apps.maps", "com.google.android.maps.MapsActivity"),
    App("Photos", "com.google.android.apps.photos", ".home.HomeActivity"),
    App("Calendar", "com.google.android.calendar", "com.android.calendar.AllInOneActivity"),
    App("Contacts", "com.google.android.contacts", "com.android.contacts.activities.PeopleActivity"),
    App("Messages", "com.google.android.apps.messaging", ".ui.ConversationListActivity"),
    App("Phone", "com.google.android.dialer", ".extensions.GoogleDialtactsActivity"),
    App("YouTube", "com.google.android.youtube", "com.google.android.apps.youtube.app.WatchWhileActivity"),
    App("Files", "com.google.android.documentsui", "com.android.documentsui.files.FilesActivity"),
    App("Calculator", "com.google.android.calculator", "com.android.calculator2.Calculator"),
    App("Play Store", "com.android.vending", "com.google.android.finsky.activities.MainActivity"),
    App("Drive", "com.google.android.apps.docs", ".app.NewMainProxyActivity"),
    App("Music", "com.simdroid.music", ".MainActivity"),
    App("Notes", "com.simdroid.notes", ".MainActivity"),
    App("Weather", "com.simdroid.weather", ".MainActivity"),
    App("Recorder", "com.google.android.apps.recorder", ".ui.RecorderActivity"),
    App("Translate", "com.google.android.apps.translate", ".TranslateActivity"),
    App("Fitness", "com.simdroid.fitness", ".MainActivity"),
    App("Podcasts", "com.simdroid.podcasts", ".MainActivity"),
    App("News", "com.simdroid.news", ".MainActivity"),
)
APPS_PER_PAGE = 16
APP_BY_PACKAGE = {app.package: app for app in APPS}
APP_BY_NAME = {app.name.lower(): app for app in APPS}


def find_app(name_or_package: str) -> App | None:
    key = name_or_package.strip()
    return APP_BY_PACKAGE.get(key) or APP_BY_NAME.get(key.lower())


def launcher_page_of(app: App) -> int:
    return APPS.index(app) // APPS_PER_PAGE


@dataclass(frozen=True)
class Toggle:
    key: str  # task parameter name
    label: str  # text on the switch
    namespace: str  # `settings get <namespace> <setting>`
    setting: str
    on_value: str
    off_value: str
    page: str  # settings sub-page holding the switch
    default_on: bool


SETTINGS_PAGES: dict[str, str] = {
    "network": "Network & internet",
    "devices": "Connected devices",
    "display": "Display",
    "sound": "Sound & vibration",
    "location": "Location",
    "battery": "Battery",
}

TOGGLES: tuple[Toggle, ...] = (
    Toggle("wifi", "Wi-Fi", "global", "wifi_on", "1", "0", "network", True),
    Toggle("airplane", "Airplane mode", "global", "airplane_mode_on", "1", "0", "network", False),
    Toggle("mobile_data", "Mobile data", "global", "mobile_data", "1", "0", "network", True),
    Toggle("bluetooth", "Bluetooth", "global", "bluetooth_on", "1", "0", "devices", False),
    Toggle("nfc", "NFC", "global", "nfc_on", "1", "0", "devices", False),
    Toggle("dark_theme", "Dark theme", "secure", "ui_night_mode", "2", "1", "display", False),
    Toggle(
        "auto_rotate", "Auto-rotate screen", "system", "accelerometer_rotation", "1", "0", "display", True
    ),
    Toggle("dnd", "Do Not Disturb", "global", "zen_mode", "1", "0", "sound", False),
    Toggle("location", "Use location", "secure", "location_mode", "3", "0", "location", True),
    Toggle("battery_saver", "Battery Saver", "global", "low_power", "1", "0", "battery", False),
)
TOGGLE_BY_KEY = {t.key: t for t in TOGGLES}

BRIGHTNESS_MAX = 255
DEFAULT_BRIGHTNESS = 128


@dataclass(frozen=True)
class ShopSite:
    domain: str  # what the user types in the URL bar
    title: str
    color: tuple[int, int, int]


SHOPS: tuple[ShopSite, ...] = (
    ShopSite("shopmart.com", "ShopMart", (0, 83, 160)),
    ShopSite("gizmohub.com", "GizmoHub", (230, 120, 0)),
    ShopSite("buyzilla.com", "Buyzilla", (200, 30, 40)),
    ShopSite("cartwheel.com", "Cartwheel", (20, 140, 80)),
    ShopSite("megastore.com", "MegaStore", (110, 40, 160)),
    ShopSite("trendbay.com", "TrendBay", (0, 140, 150)),
)
SHOP_BY_DOMAIN = {s.domain: s for s in SHOPS}
SEARCH_DOMAIN = "google.com"


def _digest(*parts: str) -> bytes:
    # hashlib, not hash(): Python's str hash is salted per process and would break determinism.
    return hashlib.sha256("\x1f".join(parts).encode()).digest()


def normalize_query(text: str) -> str:
    return " ".join(text.lower().split())


def normalize_url(text: str) -> str:
    url = text.strip().lower()
    for prefix in ("https://", "http://"):
        url = url.removeprefix(prefix)
    url = url.removeprefix("www.")
    return url.rstrip("/")


_BRANDS = ("Apex", "Nova", "Zenith", "Orbit", "Vertex", "Lumen", "Pulse", "Summit", "Echo", "Atlas")
_VARIANTS = ("Pro", "2-Pack", "Deluxe", "Mini", "Plus", "Max", "Lite", "XL", "Essential", "Ultra")
RESULTS_PER_PAGE = 5


@dataclass(frozen=True)
class Product:
    product_id: str
    name: str
    price_cents: int

    @property
    def price(self) -> str:
        return f"${self.price_cents // 100}.{self.price_cents % 100:02d}"


def search_products(domain: str, query: str) -> list[Product]:
    """The products a shop lists for a query, best match first; deterministic per (site, query)."""
    query = normalize_query(query)
    if not query:
        return []
    products = []
    for rank in range(RESULTS_PER_PAGE):
        digest = _digest(domain, query, str(rank))
        brand = _BRANDS[digest[0] % len(_BRANDS)]
        variant = _VARIANTS[digest[1] % len(_VARIANTS)]
        cents = 499 + int.from_bytes(digest[2:4], "big") % 40000
        name = f"{brand} {query.title()} {variant}"
        products.append(Product(f"{domain}:{digest[4:10].hex()}", name, cents))
    return products


def first_product(domain: str, query: str) -> Product:
    return search_products(domain, query)[0]


def web_results(query: str) -> list[str]:
    """Titles of the browser's web-search results for a query."""
    query = normalize_query(query)
    if not query:
        return []
    suffixes = ("- Wikipedia", "| News", "- Reviews & Guides", "- Official Site", "| Forum")
    return [f"{query.title()} {suffix}" for suffix in suffixes]
