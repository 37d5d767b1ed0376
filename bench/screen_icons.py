"""Text-less icon buttons under the screen observation against SimDroid's truth: found, and named.

``--screens N`` (300 by default) screens the noisy scripted expert visits on the **train** tasks
(which hold the validation selections; never the test split), noise 0.3, distractor dialogs at 10 %,
drawn readable. Each screenshot goes through the OCR and the pixel widgets (``OcrReader.read_screen``)
into elements (``screen_elements``), as the screen observation builds them. The truth is each
UI-dump ``ImageButton`` with no text (known by its content description only):

- **found**: an ``ImageButton`` element whose centre lies inside the truth's bounds (a tap on it
  hits the button);
- **named right**: of those found, named by the glyph SimDroid draws for it (``render._draw_icon``:
  "<" for *Navigate up*, "+" for the others: "back" and "add"), and how often the description's own
  word (*Add alarm*: "add") is the name;
- **false icons**: ``ImageButton`` elements over no text-less truth button, by name (a named false
  icon misleads more than an unnamed one).

Per description: truths, found, the names given. Load is recorded before and after (``machine()``).

Run: ``nice -n 5 python -m bench.screen_icons [--screens 300] [--out screen_icons]``; writes
``bench/results/<out>.json``.
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter
from typing import Any

from bench._common import machine, write_result
from distrl_core.envs.screen import ScreenConfig, screen_elements
from simulators.ocr import OcrReader
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from simulators.simdroid.device import SimDroidConfig
from simulators.simdroid.expert import expert_action
from simulators.simdroid.tasks import load_tasks

NOISE = 0.3
DRAWN = {"<": "back", "+": "add"}  # SimDroid's glyph under a text-less icon, by the name it should get


def drawn_glyph(description: str) -> str:
    """The glyph SimDroid draws for a text-less icon of this description (``render._draw_icon``)."""
    return "<" if "up" in description.lower() else "+"


def measure(count: int, seed: int) -> dict[str, Any]:
    device = SimDroidConfig(distractor_prob=0.1, seed=seed).readable()
    env = SimDroidEnv(SimDroidEnvConfig(device=device, screenshots=True, ui_xml=False, seed=seed))
    reader = OcrReader()
    config = ScreenConfig()
    tasks = load_tasks(None, "train")
    random.Random(seed).shuffle(tasks)
    rng = random.Random(seed)
    per: dict[str, Counter[str]] = {}
    truths: Counter[str] = Counter()
    false_icons: Counter[str] = Counter()
    screens = episode = 0
    seconds = 0.0
    while screens < count:
        task = tasks[episode % len(tasks)]
        observation = env.reset(task, seed=seed * 100_000 + episode)
        episode += 1
        done = False
        while screens < count:
            png = observation.screenshot_png
            assert png is not None
            started = time.perf_counter()
            boxes, shot, widgets = reader.read_screen(png, widgets_below=config.status_bar)
            read = screen_elements(boxes, shot, observation.screen_size, config, widgets)
            seconds += time.perf_counter() - started
            screens += 1
            icons = [e for e in read if e.short_class == "ImageButton"]
            matched: set[int] = set()
            for truth in observation.elements:
                if truth.short_class != "ImageButton" or truth.text:
                    continue
                truths[truth.content_desc] += 1
                x1, y1, x2, y2 = truth.bounds
                hit = next(
                    (i for i, e in enumerate(icons) if x1 <= e.center[0] < x2 and y1 <= e.center[1] < y2),
                    None,
                )
                name = icons[hit].label if hit is not None else ""
                per.setdefault(truth.content_desc, Counter())[name] += 1
                if hit is not None:
                    matched.add(hit)
            false_icons.update(e.label for i, e in enumerate(icons) if i not in matched)
            if done:
                break
            result = env.step(expert_action(env, task, noise=NOISE, rng=rng))
            observation, done = result.observation, result.done
    return _summary(screens, episode, truths, per, false_icons, seconds)


def _summary(
    screens: int,
    episodes: int,
    truths: Counter[str],
    per: dict[str, Counter[str]],
    false_icons: Counter[str],
    seconds: float,
) -> dict[str, Any]:
    total = sum(truths.values())
    found = sum(n for names in per.values() for name, n in names.items() if name)
    right = sum(per[d][DRAWN[drawn_glyph(d)]] for d in per)
    own_word = sum(n for d, names in per.items() for name, n in names.items() if name and name in d.lower())
    return {
        "screens": screens,
        "episodes": episodes,
        "textless_icon_truths": total,
        "found": found,
        "recall": round(found / max(1, total), 4),
        "named_as_drawn": right,
        "naming_accuracy_of_found": round(right / max(1, found), 4),
        "named_by_own_word_of_found": round(own_word / max(1, found), 4),
        "per_description": {
            d: {"truths": truths[d], "glyph": drawn_glyph(d), "names": dict(per[d].most_common())}
            for d in sorted(per)
        },
        "false_icons_by_name": dict(false_icons.most_common()),
        "read_ms_per_screen": round(1000 * seconds / max(1, screens), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--screens", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="screen_icons", help="result name under bench/results/")
    args = parser.parse_args()
    document: dict[str, Any] = {"bench": "screen_icons", "machine_before": machine(), "seed": args.seed}
    document["settings"] = {"device": "SimDroidConfig().readable()", "noise": NOISE, "tasks": "train"}
    started = time.perf_counter()
    document["icons"] = measure(args.screens, args.seed)
    document["seconds"] = round(time.perf_counter() - started, 1)
    document["machine_after"] = machine()
    path = write_result(args.out, document)
    print({k: v for k, v in document["icons"].items() if k != "per_description"})
    print(document["icons"]["per_description"])
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
