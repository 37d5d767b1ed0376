"""Instruction templates and parameter pools for the SimDroid tasks.

Templates are split by phrasing: a test template never appears in train. Each template has a
stable id (recorded in the task's params) so that the split can be checked.
"""

from __future__ import annotations


def _ids(prefix: str, split: str, templates: list[str]) -> list[tuple[str, str]]:
    return [(f"{prefix}-{split}-{i}", t) for i, t in enumerate(templates)]


APP_TEMPLATES = {
    "train": _ids(
        "app",
        "train",
        ["Open {app}", "Open the {app} app", "Launch {app}", "Go to the {app} app", "Start the {app} app"],
    ),
    "test": _ids(
        "app",
        "test",
        ["Please bring up {app}", "Can you get {app} running?", "I want to use the {app} application"],
    ),
}

TOGGLE_NAMES = {
    "wifi": "Wi-Fi",
    "airplane": "airplane mode",
    "mobile_data": "mobile data",
    "bluetooth": "Bluetooth",
    "nfc": "NFC",
    "dark_theme": "dark theme",
    "auto_rotate": "auto-rotate",
    "dnd": "Do Not Disturb",
    "location": "location",
    "battery_saver": "battery saver",
}

TOGGLE_TEMPLATES = {
    "train": _ids(
        "toggle",
        "train",
        [
            "Turn {on_off} {name}",
            "Switch {on_off} {name}",
            "{Enable} {name}",
            "Set {name} to {on_off}",
            "Make sure {name} is {on_off}",
        ],
    ),
    "test": _ids(
        "toggle",
        "test",
        [
            "Could you flip {name} {on_off}?",
            "I need {name} {on_off} now",
            "Change {name} so that it is {on_off}",
        ],
    ),
}

ALARM_TEMPLATES = {
    "train": _ids(
        "alarm",
        "train",
        [
            "Set an alarm for {h12}",
            "Create an alarm at {h24}",
            "Add an alarm for {h12}",
            "Wake me up at {h12}",
            "Set alarm {h24}",
        ],
    ),
    "test": _ids(
        "alarm",
        "test",
        ["I need an alarm at {h12}", "Schedule a wake-up alarm for {h24}", "Please make an alarm for {h12}"],
    ),
}

SEARCH_TEMPLATES = {
    "train": _ids(
        "search",
        "train",
        [
            'Search for "{q}"',
            'Search the web for "{q}"',
            'Google "{q}"',
            'Look up "{q}" on Google',
            'Use Chrome to search for "{q}"',
        ],
    ),
    "test": _ids(
        "search",
        "test",
        ['Do a web search for "{q}"', 'Find web results about "{q}"', 'Run an internet search: "{q}"'],
    ),
}

BRIGHTNESS_TEMPLATES = {
    "train": _ids(
        "brightness",
        "train",
        [
            "Set the brightness to {p}%",
            "Change screen brightness to {p} percent",
            "Adjust the display brightness to {p}%",
            "Make the screen brightness {p}%",
        ],
    ),
    "test": _ids(
        "brightness", "test", ["Put the brightness level at {p}%", "I'd like the screen at {p}% brightness"]
    ),
}

SHOP_TEMPLATES = {
    "train": {
        1: _ids("shop1", "train", ["Go to {site}", "Open {site}", "Visit {site}", "Navigate to {site}"]),
        2: _ids(
            "shop2",
            "train",
            [
                'Go to {site}, search for "{q}"',
                'Open {site} and search for "{q}"',
                'Search {site} for "{q}"',
                'On {site}, look for "{q}"',
            ],
        ),
        3: _ids(
            "shop3",
            "train",
            [
                'Go to {site}, search for "{q}", and add the first result to the cart',
                'Open {site}, search for "{q}" and add the first item to the cart',
                'On {site}, add the first result for "{q}" to your cart',
                'Search {site} for "{q}" and put the top result in the cart',
            ],
        ),
    },
    "test": {
        1: _ids("shop1", "test", ["Take me to {site}", "Browse to the {site} website"]),
        2: _ids("shop2", "test", ['Find "{q}" on {site}', 'Visit {site} and run a search for "{q}"']),
        3: _ids(
            "shop3",
            "test",
            [
                'Visit {site}, look up "{q}", and add the top hit to the basket',
                'I want the first "{q}" listed on {site} in my cart',
            ],
        ),
    },
}

SEARCH_QUERIES = [
    "weather in paris", "how tall is the eiffel tower", "best pizza near me", "population of canada",
    "how to boil an egg", "distance to the moon", "who painted the mona lisa", "easy pasta recipes",
    "what time is it in tokyo", "symptoms of a cold", "cheap flights to london", "how to tie a tie",
    "news about electric cars", "largest ocean on earth", "how many ounces in a cup", "movies playing tonight",
    "history of the internet", "how to learn python", "speed of light", "best hiking trails nearby",
    "translate hello to spanish", "price of bitcoin", "how to change a tire", "world cup winners",
    "benefits of green tea", "how do vaccines work", "what is machine learning", "capital of australia",
    "how to grow tomatoes", "stock market today", "nearest gas station", "how old is the sun",
    "vegan dessert ideas", "how to meditate", "local library hours", "convert 10 miles to km",
    "how to make cold brew", "tallest mountain in africa", "when is the next full moon", "yoga for beginners",
]  # fmt: skip

PRODUCT_QUERIES = [
    "usb-c cable", "wireless mouse", "gaming keyboard", "bluetooth speaker", "coffee maker", "running shoes",
    "noise cancelling headphones", "laptop stand", "water bottle", "desk lamp", "phone case", "smart watch",
    "hdmi cable", "air fryer", "yoga mat", "backpack", "electric toothbrush", "webcam", "external hard drive",
    "office chair", "led light strip", "portable charger", "sunglasses", "board game", "instant camera",
    "memory card", "tablet", "kitchen scale", "rice cooker", "dumbbells", "monitor", "printer paper",
    "vacuum cleaner", "wall clock", "travel pillow", "baby monitor", "dog leash", "cat toy", "tent",
    "umbrella", "blender", "hair dryer", "soundbar", "microphone", "router", "ssd drive", "graphics card",
    "mechanical pencil",
]  # fmt: skip


def format_12h(hour: int, minute: int) -> str:
    suffix = "AM" if hour < 12 else "PM"
    return f"{(hour % 12) or 12}:{minute:02d} {suffix}"
